/*
 * model_text.c - the text side of a model directory: its tokenizer
 * (tokenizer.json or the GGUF vocabulary the converter kept) and its chat
 * template (a file of its own, or the tokenizer's). Loaded once with the
 * model; the model owns and frees both (rkm_model_close).
 */
#include "runtime/model_text.h"

#include "text/tokenizer.h"
#include "util/common.h"

int rkm_model_text_load(const rkm_model_dir *md, const char *dir, int n_vocab, struct rkm_tokenizer **tok,
                        char **chat_template)
{
    int rc;
    *tok = NULL;
    *chat_template = NULL;
    if (md->tokenizer_file) {
        char *path = rkm_path_join(dir, md->tokenizer_file);
        char *cfg = md->tokenizer_config_file ? rkm_path_join(dir, md->tokenizer_config_file) : NULL;
        if (!path || (md->tokenizer_config_file && !cfg)) {
            free(path);
            free(cfg);
            return rkm_err(RKM_ENOMEM, "model: out of memory");
        }
        *tok = rkm_tokenizer_load(path, cfg);
        free(path);
        free(cfg);
        if (!*tok) return rkm_err_prefix(RKM_EFORMAT, "model: tokenizer");
        if (rkm_tokenizer_n_vocab(*tok) > n_vocab) {
            rc = rkm_err(RKM_EFORMAT, "model: tokenizer has %d tokens, the model %d", rkm_tokenizer_n_vocab(*tok),
                         n_vocab);
            goto fail;
        }
    }
    if (md->chat_template_file) {
        char *path = rkm_path_join(dir, md->chat_template_file);
        size_t len;
        *chat_template = path ? rkm_read_file(path, &len) : NULL;
        free(path);
        if (!*chat_template) {
            rc = rkm_err_prefix(RKM_EIO, "model: chat template");
            goto fail;
        }
    } else if (*tok && rkm_tokenizer_chat_template(*tok)) {
        *chat_template = strdup(rkm_tokenizer_chat_template(*tok));
        if (!*chat_template) {
            rc = rkm_err(RKM_ENOMEM, "model: out of memory");
            goto fail;
        }
    }
    return 0;
fail:
    rkm_tokenizer_free(*tok);
    *tok = NULL;
    return rc;
}

void rkm_model_text_free(struct rkm_tokenizer *tok, char *chat_template)
{
    rkm_tokenizer_free(tok);
    free(chat_template);
}
