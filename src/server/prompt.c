/*
 * prompt.c - turns a request into prompt tokens: chat messages through the
 * model's chat template (src/text/chat.h; the built-in fallback for its
 * architecture when it has none), Ollama's generate prompt with its optional system message, or the
 * raw completion prompt; then the tokenizer.
 *
 * Called by the worker thread only. A srv_prompt (template source, BOS/EOS
 * texts) belongs to the loaded model's state and is freed with it.
 */
#include "server/prompt.h"

#include "text/chat.h"
#include "util/common.h"

struct srv_prompt {
    const char *tmpl; /* the model's template, or a built-in fallback */
    char *bos, *eos;  /* token texts ("" if none) */
};

static char *piece_text(const rkm_model *m, int id)
{
    char buf[256];
    if (id < 0) return strdup("");
    int n = rkm_token_to_piece(m, id, buf, (int)sizeof buf - 1);
    if (n < 0) n = 0;
    buf[n] = 0;
    return strdup(buf);
}

srv_prompt *srv_prompt_new(const rkm_model *m)
{
    srv_prompt *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->tmpl = rkm_model_chat_template(m);
    if (!p->tmpl || !*p->tmpl) p->tmpl = rkm_chat_builtin_template(rkm_chat_builtin_for_arch(rkm_model_arch(m)));
    if (!p->tmpl) p->tmpl = rkm_chat_builtin_template("chatml");
    p->bos = piece_text(m, rkm_token_bos(m));
    p->eos = piece_text(m, rkm_token_eos(m));
    if (!p->tmpl || !p->bos || !p->eos) {
        srv_prompt_free(p);
        rkm_err(RKM_ENOMEM, "no chat template");
        return NULL;
    }
    return p;
}

void srv_prompt_free(srv_prompt *p)
{
    if (!p) return;
    free(p->bos);
    free(p->eos);
    free(p);
}

/* Renders messages with the template (sys_override replaces any system
 * message, as Ollama's generate "system" does). NULL + rkm_err on failure. */
static char *render(const srv_prompt *p, const srv_msg *msgs, int n, const char *sys_override)
{
    rkm_chat_msg *cm = calloc((size_t)n + 1, sizeof *cm);
    if (!cm) {
        rkm_err(RKM_ENOMEM, "out of memory");
        return NULL;
    }
    int k = 0;
    if (sys_override) cm[k++] = (rkm_chat_msg){"system", sys_override};
    for (int i = 0; i < n; i++) {
        if (sys_override && !strcmp(msgs[i].role, "system")) continue;
        cm[k++] = (rkm_chat_msg){msgs[i].role, msgs[i].content};
    }
    char *out = rkm_chat_render(p->tmpl, cm, k, 1, p->bos, p->eos);
    free(cm);
    return out;
}

/* Tokenizes text into a malloc'd array. 0 or a negative code + err. */
static int tokenize(const rkm_model *m, const char *text, int add_bos, int parse_special,
                    int32_t **ids, int *n_ids, char *err, size_t errcap)
{
    size_t len = strlen(text);
    int cap = (int)RKM_MIN(len + 16, (size_t)1 << 24);
    int32_t *buf = malloc(sizeof(int32_t) * (size_t)cap);
    int n = buf ? rkm_tokenize(m, text, len, buf, cap, add_bos, parse_special) : RKM_ENOMEM;
    if (n > cap) {
        int32_t *b2 = realloc(buf, sizeof(int32_t) * (size_t)n);
        if (!b2) {
            n = RKM_ENOMEM;
        } else {
            buf = b2;
            n = rkm_tokenize(m, text, len, buf, n, add_bos, parse_special);
        }
    }
    if (n < 0) {
        free(buf);
        snprintf(err, errcap, "tokenizer: %s", n == RKM_ENOMEM ? "out of memory" : rkm_last_error());
        return n;
    }
    *ids = buf;
    *n_ids = n;
    return 0;
}

int srv_prompt_tokens(const srv_prompt *p, const rkm_model *m, const srv_request *rq,
                      int32_t **ids, int *n_ids, char *err, size_t errcap)
{
    *ids = NULL;
    *n_ids = 0;
    char *text = NULL;
    int add_bos = 1;
    if (rq->kind == SRV_OPENAI_CHAT || rq->kind == SRV_OLLAMA_CHAT) {
        text = render(p, rq->msgs, rq->n_msgs, NULL);
    } else if (rq->kind == SRV_OLLAMA_GENERATE && !rq->raw) {
        srv_msg user = {(char *)"user", rq->prompt ? rq->prompt : (char *)""};
        text = render(p, &user, 1, rq->system);
    } else {
        text = strdup(rq->prompt ? rq->prompt : "");
    }
    if (!text) {
        snprintf(err, errcap, "chat template: %s", rkm_last_error());
        return RKM_EINVAL;
    }
    /* A template that writes the BOS text itself gets no second BOS. */
    size_t nb = strlen(p->bos);
    if (nb && !strncmp(text, p->bos, nb)) add_bos = 0;
    int rc = tokenize(m, text, add_bos, 1, ids, n_ids, err, errcap);
    free(text);
    return rc;
}

int srv_text_tokens(const rkm_model *m, const char *text, int32_t **ids, int *n_ids, char *err,
                    size_t errcap)
{
    return tokenize(m, text, 1, 0, ids, n_ids, err, errcap);
}
