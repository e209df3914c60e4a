/*
 * sampler.c - token sampling (see sampler.h for the order of the steps).
 *
 * Owns: a candidate array of n_vocab (id, logit, p) triples and the penalty
 * counts, allocated once in rkm_sampler_new, so sampling allocates nothing.
 * Used by one thread at a time (its session's).
 */
#include "runtime/sampler.h"

#include <math.h>

#include "util/common.h"

typedef struct {
    int32_t id;
    float logit;
    float p;
} cand;

struct rkm_sampler {
    rkm_sampler_params p;
    int n_vocab;
    cand *c;          /* n_vocab */
    int32_t *count;   /* n_vocab occurrence counts (penalties) */
    uint64_t s[4];    /* xoshiro256** state */
};

/* The one set of sampling defaults of rkmojo (run, chat, both server APIs;
 * the table is in docs/SERVER.md): llama.cpp's, a moderate temperature
 * with top-k, top-p and min-p trimming the tail, no repetition penalty. */
void rkm_sampler_params_default(rkm_sampler_params *p)
{
    memset(p, 0, sizeof *p);
    p->temperature = 0.8f;
    p->top_k = 40;
    p->top_p = 0.95f;
    p->min_p = 0.05f;
    p->repeat_penalty = 1.0f;
    p->repeat_last_n = 64;
    p->seed = 0x5eed;
}

/* The model's defaults are the common ones until models carry recommended
 * settings; every front end asks here, so that overlay lands in one place. */
static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t next_u64(rkm_sampler *s)
{
    uint64_t *st = s->s;
    uint64_t r = rotl(st[1] * 5, 7) * 9, t = st[1] << 17;
    st[2] ^= st[0];
    st[3] ^= st[1];
    st[1] ^= st[2];
    st[0] ^= st[3];
    st[2] ^= t;
    st[3] = rotl(st[3], 45);
    return r;
}

double rkm_sampler_uniform(rkm_sampler *s) { return (double)(next_u64(s) >> 11) * (1.0 / 9007199254740992.0); }

void rkm_sampler_seed(rkm_sampler *s, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) s->s[i] = splitmix64(&x);
}

rkm_sampler *rkm_sampler_new(const rkm_sampler_params *p, int n_vocab)
{
    if (n_vocab <= 0) {
        rkm_err(RKM_EINVAL, "sampler: n_vocab %d", n_vocab);
        return NULL;
    }
    rkm_sampler *s = calloc(1, sizeof *s);
    if (!s) goto oom;
    s->c = malloc(sizeof(cand) * (size_t)n_vocab);
    s->count = calloc((size_t)n_vocab, sizeof(int32_t));
    if (!s->c || !s->count) goto oom;
    s->n_vocab = n_vocab;
    if (p) s->p = *p;
    else rkm_sampler_params_default(&s->p);
    rkm_sampler_seed(s, s->p.seed);
    return s;
oom:
    rkm_sampler_free(s);
    rkm_err(RKM_ENOMEM, "sampler: out of memory");
    return NULL;
}

void rkm_sampler_free(rkm_sampler *s)
{
    if (!s) return;
    free(s->c);
    free(s->count);
    free(s);
}

const rkm_sampler_params *rkm_sampler_get_params(const rkm_sampler *s) { return &s->p; }

void rkm_sampler_set_params(rkm_sampler *s, const rkm_sampler_params *p)
{
    s->p = *p;
}

static int cmp_desc(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return x->id < y->id ? -1 : (x->id > y->id);
}

/* Min-heap on logit (ties: larger id is "smaller", so the lowest ids win). */
static int heap_less(const cand *a, const cand *b)
{
    if (a->logit != b->logit) return a->logit < b->logit;
    return a->id > b->id;
}

static void sift_down(cand *h, int n, int i)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && heap_less(&h[l], &h[m])) m = l;
        if (r < n && heap_less(&h[r], &h[m])) m = r;
        if (m == i) return;
        cand t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

/* Logit l after the penalties, for a token seen count times in the window. */
static float penalised(const rkm_sampler_params *p, float l, int32_t count)
{
    if (p->repeat_penalty > 0 && p->repeat_penalty != 1.0f)
        l = l > 0 ? l / p->repeat_penalty : l * p->repeat_penalty;
    return l - ((float)count * p->frequency_penalty + p->presence_penalty);
}

static int use_penalties(const rkm_sampler_params *p)
{
    return (p->repeat_penalty != 1.0f && p->repeat_penalty > 0) || p->presence_penalty != 0 ||
           p->frequency_penalty != 0;
}

/* Greedy: the largest logit after penalties, lowest id on ties, without
 * building the candidate list (top-k/p and min-p never drop the argmax).
 * The window's ids are counted first, penalised in the scan and their
 * counts cleared after. NaN never wins; all NaN gives id 0. */
static int32_t argmax(rkm_sampler *s, const float *logits, const int32_t *hist, int n_hist)
{
    const rkm_sampler_params *p = &s->p;
    int n = s->n_vocab, last = 0;
    const int32_t *h = NULL;
    if (use_penalties(p) && hist && n_hist > 0) {
        last = p->repeat_last_n < 0 ? n_hist : RKM_MIN(p->repeat_last_n, n_hist);
        h = hist + n_hist - last;
        for (int i = 0; i < last; i++)
            if (h[i] >= 0 && h[i] < n) s->count[h[i]]++;
    }
    int32_t best = -1;
    float bl = 0;
    for (int i = 0; i < n; i++) {
        float l = logits[i];
        if (last && s->count[i]) l = penalised(p, l, s->count[i]);
        if (l > bl || (best < 0 && l == l)) {
            best = i;
            bl = l;
        }
    }
    for (int i = 0; i < last; i++)
        if (h[i] >= 0 && h[i] < n) s->count[h[i]] = 0;
    return best < 0 ? 0 : best;
}

/* Fills s->c with the candidates after penalties and top-k, sorted by
 * descending logit; returns their count. */
static int prepare(rkm_sampler *s, const float *logits, const int32_t *hist, int n_hist)
{
    const rkm_sampler_params *p = &s->p;
    int n = s->n_vocab;
    for (int i = 0; i < n; i++) {
        s->c[i].id = i;
        s->c[i].logit = logits[i];
    }
    if (use_penalties(p) && hist && n_hist > 0) {
        int last = p->repeat_last_n < 0 ? n_hist : RKM_MIN(p->repeat_last_n, n_hist);
        const int32_t *h = hist + n_hist - last;
        for (int i = 0; i < last; i++)
            if (h[i] >= 0 && h[i] < n) s->count[h[i]]++;
        for (int i = 0; i < last; i++) {
            int t = h[i];
            if (t < 0 || t >= n || s->count[t] == 0) continue;
            s->c[t].logit = penalised(p, s->c[t].logit, s->count[t]);
            s->count[t] = 0; /* once per distinct id; also resets the counts */
        }
    }
    int k = p->top_k;
    if (k > 0 && k < n) {
        /* keep the k largest in a min-heap at the front */
        cand *h = s->c;
        for (int i = k / 2 - 1; i >= 0; i--) sift_down(h, k, i);
        for (int i = k; i < n; i++) {
            if (heap_less(&h[0], &h[i])) {
                h[0] = h[i];
                sift_down(h, k, 0);
            }
        }
        n = k;
    }
    qsort(s->c, (size_t)n, sizeof(cand), cmp_desc);
    return n;
}

/* Applies top-p / min-p / temperature on sorted candidates; leaves final
 * probabilities in c[].p and returns the number kept. */
static int filter(rkm_sampler *s, int n)
{
    const rkm_sampler_params *p = &s->p;
    cand *c = s->c;
    double sum = 0;
    float mx = c[0].logit;
    for (int i = 0; i < n; i++) sum += exp((double)c[i].logit - mx);
    if (p->top_p > 0 && p->top_p < 1) {
        double cum = 0;
        int keep = n;
        for (int i = 0; i < n; i++) {
            cum += exp((double)c[i].logit - mx) / sum;
            if (cum >= p->top_p) {
                keep = i + 1;
                break;
            }
        }
        n = keep;
    }
    if (p->min_p > 0 && p->min_p <= 1) {
        /* p_i / p_max = exp(l_i - l_max) */
        int keep = 1;
        while (keep < n && exp((double)c[keep].logit - mx) >= p->min_p) keep++;
        n = keep;
    }
    double t = p->temperature;
    sum = 0;
    for (int i = 0; i < n; i++) {
        double e = exp(((double)c[i].logit - mx) / t);
        c[i].p = (float)e;
        sum += e;
    }
    for (int i = 0; i < n; i++) c[i].p = (float)(c[i].p / sum);
    return n;
}

int32_t rkm_sampler_sample(rkm_sampler *s, const float *logits, const int32_t *hist, int n_hist)
{
    if (!(s->p.temperature > 0)) return argmax(s, logits, hist, n_hist);
    int n = prepare(s, logits, hist, n_hist);
    n = filter(s, n);
    double u = rkm_sampler_uniform(s), cum = 0;
    for (int i = 0; i < n; i++) {
        cum += s->c[i].p;
        if (u < cum) return s->c[i].id;
    }
    return s->c[n - 1].id;
}

void rkm_sampler_probs(rkm_sampler *s, const float *logits, const int32_t *hist, int n_hist,
                       float *probs)
{
    memset(probs, 0, sizeof(float) * (size_t)s->n_vocab);
    if (!(s->p.temperature > 0)) {
        probs[argmax(s, logits, hist, n_hist)] = 1;
        return;
    }
    int n = prepare(s, logits, hist, n_hist);
    n = filter(s, n);
    for (int i = 0; i < n; i++) probs[s->c[i].id] = s->c[i].p;
}
