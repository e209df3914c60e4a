/*
 * tokens.c - rkm_tokenize, rkm_token_to_piece and friends: the public
 * token API over the model's tokenizer (src/text/tokenizer.h; loaded by
 * model_text.c). The tokenizer is immutable: any thread.
 */
#include "runtime/tokens.h"

#include "runtime/model.h"
#include "text/tokenizer.h"

const struct rkm_tokenizer *rkm_model_tokenizer(const rkm_model *m) { return m->tok; }

int rkm_tokenize(const rkm_model *m, const char *text, size_t len, int32_t *ids, int cap, int add_bos,
                 int parse_special)
{
    if (!m || !text) return rkm_err(RKM_EINVAL, "tokenize: bad arguments");
    if (!m->tok) return rkm_err(RKM_EUNSUPPORTED, "tokenize: the model has no tokenizer");
    return rkm_tokenizer_encode(m->tok, text, len, ids, cap, add_bos, parse_special);
}

int rkm_tokenize_alloc(const rkm_model *m, const char *text, size_t len, int add_bos, int parse_special,
                       int32_t **ids)
{
    *ids = NULL;
    /* a first guess of one id per byte, bounded so a huge text does not
     * allocate ahead of need; rkm_tokenize says when more is needed */
    int cap = (int)RKM_MIN(len + 16, (size_t)1 << 24);
    int32_t *v = malloc(sizeof(int32_t) * (size_t)cap);
    if (!v) return rkm_err(RKM_ENOMEM, "tokenize: out of memory");
    int n = rkm_tokenize(m, text, len, v, cap, add_bos, parse_special);
    if (n > cap) {
        int32_t *nv = realloc(v, sizeof(int32_t) * (size_t)n);
        if (!nv) {
            free(v);
            return rkm_err(RKM_ENOMEM, "tokenize: out of memory");
        }
        v = nv;
        n = rkm_tokenize(m, text, len, v, n, add_bos, parse_special);
    }
    if (n < 0) {
        free(v);
        return n;
    }
    *ids = v;
    return n;
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
