/*
 * tokens.c - rkm_tokenize, rkm_token_to_piece and friends: the public
 * token API over the model's tokenizer (src/text/tokenizer.h), and loading
 * the tokenizer and chat template of a model directory.
 *
 * Owns the model's tokenizer and template string (freed by
 * rkm_model_free_text). The tokenizer is immutable: any thread.
 */
#include "runtime/tokens.h"

#include "runtime/model.h"
#include "text/tokenizer.h"

int rkm_model_load_text(rkm_model *m, const char *dir)
{
    const rkm_model_dir *md = m->md;
    if (md->tokenizer_file) {
        char *path = rkm_path_join(dir, md->tokenizer_file);
        char *cfg = md->tokenizer_config_file ? rkm_path_join(dir, md->tokenizer_config_file) : NULL;
        if (!path || (md->tokenizer_config_file && !cfg)) {
            free(path);
            free(cfg);
            return rkm_err(RKM_ENOMEM, "model: out of memory");
        }
        m->tok = rkm_tokenizer_load(path, cfg);
        free(path);
        free(cfg);
        if (!m->tok) return rkm_err_prefix(RKM_EFORMAT, "model: tokenizer");
        if (rkm_tokenizer_n_vocab(m->tok) > m->hp.n_vocab)
            return rkm_err(RKM_EFORMAT, "model: tokenizer has %d tokens, the model %d",
                           rkm_tokenizer_n_vocab(m->tok), m->hp.n_vocab);
    }
    if (md->chat_template_file) {
        char *path = rkm_path_join(dir, md->chat_template_file);
        size_t len;
        m->chat_template = path ? rkm_read_file(path, &len) : NULL;
        free(path);
        if (!m->chat_template) return rkm_err_prefix(RKM_EIO, "model: chat template");
    } else if (m->tok && rkm_tokenizer_chat_template(m->tok)) {
        m->chat_template = strdup(rkm_tokenizer_chat_template(m->tok));
        if (!m->chat_template) return rkm_err(RKM_ENOMEM, "model: out of memory");
    }
    return 0;
}

void rkm_model_free_text(rkm_model *m)
{
    rkm_tokenizer_free(m->tok);
    m->tok = NULL;
    free(m->chat_template);
    m->chat_template = NULL;
}

const struct rkm_tokenizer *rkm_model_tokenizer(const rkm_model *m) { return m->tok; }

int rkm_tokenize(const rkm_model *m, const char *text, size_t len, int32_t *ids, int cap, int add_bos,
                 int parse_special)
{
    if (!m || !text) return rkm_err(RKM_EINVAL, "tokenize: bad arguments");
    if (!m->tok) return rkm_err(RKM_EUNSUPPORTED, "tokenize: the model has no tokenizer");
    return rkm_tokenizer_encode(m->tok, text, len, ids, cap, add_bos, parse_special);
}

int rkm_token_to_piece(const rkm_model *m, int32_t id, char *buf, int cap)
{
    if (!m || !m->tok) return 0;
    return rkm_tokenizer_piece(m->tok, id, buf, cap);
}

int rkm_token_bos(const rkm_model *m) { return m && m->tok ? rkm_tokenizer_bos(m->tok) : -1; }
int rkm_token_eos(const rkm_model *m) { return m && m->tok ? rkm_tokenizer_eos(m->tok) : -1; }

int rkm_token_is_eog(const rkm_model *m, int32_t id)
{
    return m && m->tok ? rkm_tokenizer_is_eog(m->tok, id) : 0;
}
