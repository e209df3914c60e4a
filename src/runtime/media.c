/*
 * media.c - see media.h.
 */
#include "runtime/media.h"

#include "runtime/model.h"

/* Appends n ids to p->ids (cap in *cap). */
static int push_ids(rkm_media_prompt *p, int *cap, const int32_t *ids, int n)
{
    if (n <= 0) return 0;
    if (p->n_ids + n > *cap) {
        int nc = RKM_MAX(2 * *cap, p->n_ids + n + 64);
        int32_t *t = realloc(p->ids, sizeof(int32_t) * (size_t)nc);
        if (!t) return rkm_err(RKM_ENOMEM, "prompt: out of memory");
        p->ids = t;
        *cap = nc;
    }
    memcpy(p->ids + p->n_ids, ids, sizeof(int32_t) * (size_t)n);
    p->n_ids += n;
    return 0;
}

/* Tokenizes text[0..len) with special tokens parsed and appends it. */
static int push_text(const rkm_model *m, rkm_media_prompt *p, int *cap, const char *text, size_t len, int add_bos)
{
    int32_t *ids = NULL;
    int n = rkm_tokenize_alloc(m, text, len, add_bos, 1, &ids);
    if (n < 0) return n;
    int rc = push_ids(p, cap, ids, n);
    free(ids);
    return rc;
}

int rkm_media_count_markers(const char *text)
{
    int n = 0;
    for (const char *q = text; (q = strstr(q, RKM_MEDIA_MARKER)); q += strlen(RKM_MEDIA_MARKER)) n++;
    return n;
}

int rkm_media_prompt_build(const rkm_model *m, const rkm_vision_hparams *vp, const char *text, rkm_image *imgs,
                           int n_img, int add_bos, rkm_media_prompt *out)
{
    memset(out, 0, sizeof *out);
    const int n_mark = rkm_media_count_markers(text);
    const rkm_proj_info *pi = n_img && vp ? rkm_proj_info_of(vp->proj) : NULL;
    int cap = 0, rc = 0;
    if (n_mark != n_img)
        rc = rkm_err(RKM_EINVAL, "the prompt has %d image marker%s (" RKM_MEDIA_MARKER ") and %d image%s given",
                     n_mark, n_mark == 1 ? "" : "s", n_img, n_img == 1 ? " is" : "s are");
    else if (n_img && !pi)
        rc = rkm_err(RKM_EINVAL, "images given without a vision tower of a known projector type");
    else if (n_img && !(out->img = calloc((size_t)n_img, sizeof *out->img)))
        rc = rkm_err(RKM_ENOMEM, "prompt: out of memory");
    if (rc) goto fail;
    out->bidirectional = pi ? pi->bidirectional : 0;
    /* BOS (when the vocabulary wants one) leads, whatever comes first */
    if (add_bos && (rc = push_text(m, out, &cap, "", 0, 1))) goto fail;
    const char *q = text;
    for (int i = 0; i <= n_img; i++) {
        const char *e = i < n_img ? strstr(q, RKM_MEDIA_MARKER) : q + strlen(q);
        if (e > q && (rc = push_text(m, out, &cap, q, (size_t)(e - q), 0))) goto fail;
        if (i == n_img) break;
        q = e + strlen(RKM_MEDIA_MARKER);
        rkm_media_image *mi = &out->img[out->n_img++];
        mi->im = imgs[i];
        memset(&imgs[i], 0, sizeof imgs[i]);
        rkm_hasher *h = rkm_hasher_new();
        if (!h) {
            rc = rkm_err(RKM_ENOMEM, "prompt: out of memory");
            goto fail;
        }
        const int32_t wh[2] = {mi->im.w, mi->im.h};
        rkm_hasher_update(h, wh, sizeof wh);
        rkm_hasher_update(h, mi->im.rgb, (size_t)mi->im.w * (size_t)mi->im.h * 3);
        mi->key = rkm_hasher_digest(h);
        rkm_hasher_free(h);
        int tw, th;
        mi->n_tokens = rkm_vision_fit(vp, mi->im.w, mi->im.h, &tw, &th);
        mi->nx = tw / (vp->patch_size * vp->n_merge);
        if (mi->n_tokens < 1) {
            rc = rkm_err(RKM_EINVAL, "image %d (%dx%d) makes no image tokens", i, mi->im.w, mi->im.h);
            goto fail;
        }
        out->max_image_tokens = RKM_MAX(out->max_image_tokens, mi->n_tokens);
        if ((rc = push_text(m, out, &cap, pi->img_beg, strlen(pi->img_beg), 0))) goto fail;
        mi->pos = out->n_ids;
        for (int r = 0; r < mi->n_tokens && !rc; r++) {
            const int32_t id = rkm_media_token(mi->key, r);
            rc = push_ids(out, &cap, &id, 1);
        }
        if (rc || (rc = push_text(m, out, &cap, pi->img_end, strlen(pi->img_end), 0))) goto fail;
    }
    if (out->n_ids == 0) {
        rc = rkm_err(RKM_EINVAL, "the prompt is empty");
        goto fail;
    }
    return 0;
fail:
    for (int i = out->n_img; i < n_img; i++) rkm_image_free(&imgs[i]);
    rkm_media_prompt_free(out);
    return rc;
}

void rkm_media_prompt_free(rkm_media_prompt *p)
{
    if (!p) return;
    for (int i = 0; i < p->n_img; i++) rkm_image_free(&p->img[i].im);
    free(p->img);
    free(p->ids);
    memset(p, 0, sizeof *p);
}

int rkm_media_image_prep(const rkm_media_prompt *p, int i, const rkm_vision *v, float **img, int *w, int *h)
{
    const rkm_media_image *mi = &p->img[i];
    return rkm_vision_prep(rkm_vision_hparams_of(v), mi->im.rgb, mi->im.w, mi->im.h, img, w, h);
}

int rkm_media_image_put(rkm_session *s, const rkm_media_prompt *p, int i, const float *rows, int nt, int n_out)
{
    const rkm_media_image *mi = &p->img[i];
    if (nt != mi->n_tokens)
        return rkm_err(RKM_EINVAL, "image %d: the tower made %d rows, %d were expected", i, nt, mi->n_tokens);
    if (n_out != rkm_session_n_embd_in(s))
        return rkm_err(RKM_EINVAL, "the vision tower's rows have %d values and the text model takes %d", n_out,
                       rkm_session_n_embd_in(s));
    int rc = p->on_rows ? p->on_rows(p->user, i, rows, nt, n_out) : 0;
    return rc ? rc : rkm_session_eval_embd(s, rows, nt, mi->nx, mi->key, p->bidirectional, NULL);
}

int rkm_media_image_eval(rkm_session *s, const rkm_media_prompt *p, int i, rkm_vision *v, rkm_pool *pool)
{
    if (!v) return rkm_err(RKM_EINVAL, "image %d is to be encoded and there is no vision tower", i);
    int rc = rkm_vision_bind(v, s->m); /* the NPU's when the text model runs there */
    if (rc < 0) return rc;
    float *prep = NULL, *emb = NULL;
    int tw, th, nt = 0;
    rc = rkm_media_image_prep(p, i, v, &prep, &tw, &th);
    if (!rc) rc = rkm_vision_encode(v, pool, prep, tw, th, &emb, &nt);
    if (!rc) rc = rkm_media_image_put(s, p, i, emb, nt, rkm_vision_n_out(v));
    free(prep);
    free(emb);
    return rc;
}

int rkm_media_prompt_eval(rkm_session *s, const rkm_media_prompt *p, rkm_vision *v, rkm_pool *pool, int *n_encoded)
{
    if (n_encoded) *n_encoded = 0;
    if (!p->n_ids) return rkm_err(RKM_EINVAL, "the prompt is empty");
    int held;
    const int32_t *have = rkm_session_tokens(s, &held);
    int k = 0;
    while (k < held && k < p->n_ids && have[k] == p->ids[k]) k++;
    if (k == p->n_ids) k--; /* the last position again: its logits */
    for (int i = 0; i < p->n_img; i++) /* never into an image's middle */
        if (k > p->img[i].pos && k < p->img[i].pos + p->img[i].n_tokens) k = p->img[i].pos;
    int rc = rkm_session_truncate(s, k);
    if (rc == RKM_EUNSUPPORTED) rc = rkm_session_truncate(s, k = 0);
    if (rc) return rc;
    int at = k;
    for (int i = 0; i <= p->n_img && !rc; i++) {
        const int end = i < p->n_img ? p->img[i].pos : p->n_ids;
        if (end > at) rc = rkm_session_eval(s, p->ids + at, end - at, NULL);
        at = RKM_MAX(at, end);
        if (rc || i == p->n_img) break;
        const rkm_media_image *mi = &p->img[i];
        if (at >= mi->pos + mi->n_tokens) continue; /* held already */
        if ((rc = rkm_media_image_eval(s, p, i, v, pool))) break;
        if (n_encoded) (*n_encoded)++;
        at = mi->pos + mi->n_tokens;
    }
    return rc;
}
