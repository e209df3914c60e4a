/*
 * vocab_builtin.c - the built-in small byte-level BPE vocabulary used by
 * synthetic models (`rkmojo synth` without --vocab-from): 256 byte tokens
 * in GPT-2's order, merges learned by BPE training on the text embedded
 * below (deterministic: most frequent pair, ties to the smallest ids), then
 * control tokens. The result is built as a tokenizer.json document and
 * loaded through the ordinary loader, so it behaves exactly like a file.
 *
 * Threads: none shared; each call builds a new tokenizer the caller frees.
 */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer.h"
#include "text/unicode.h"
#include "util/common.h"

/* A little English prose and C/Python code: enough for a few thousand
 * merges that look like real subwords. */
static const char training_text[] =
    "The quick brown fox jumps over the lazy dog. A mixture of experts model routes every token to a small\n"
    "number of experts, so most of its weights are idle for any one token. This engine keeps the attention\n"
    "weights, the embeddings and the router in memory, and streams the routed experts from disk as they\n"
    "are needed. An expert cache holds the experts that were used recently or often; a prefetcher guesses\n"
    "which experts the next layer will want and reads them while the current layer computes.\n"
    "When the cache is large enough, the model runs at the speed of the processor; when it is small, the\n"
    "speed of the disk decides. The numbers that matter are the hit rate of the cache, the bytes read per\n"
    "token and the time the compute threads wait for input and output.\n"
    "Once upon a time there was a little girl who lived in a village near the forest. Whenever she went\n"
    "out, the little girl wore a red riding cloak, so everyone in the village called her Little Red Riding\n"
    "Hood. One morning, Little Red Riding Hood asked her mother if she could go to visit her grandmother\n"
    "as it had been awhile since they had seen each other. \"That's a good idea,\" her mother said.\n"
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of\n"
    "foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the season of Light,\n"
    "it was the season of Darkness, it was the spring of hope, it was the winter of despair.\n"
    "Question: What is the capital of France? Answer: The capital of France is Paris.\n"
    "Question: How many legs does a spider have? Answer: A spider has eight legs.\n"
    "User: Can you help me write a function that adds two numbers?\n"
    "Assistant: Of course! Here is a simple function in Python and the same function in C.\n"
    "def add(a, b):\n    return a + b\n\n"
    "def main():\n    total = 0\n    for i in range(10):\n        total += add(i, i * 2)\n    print(total)\n\n"
    "if __name__ == \"__main__\":\n    main()\n\n"
    "#include <stdio.h>\n#include <stdlib.h>\n\n"
    "static int add(int a, int b)\n{\n    return a + b;\n}\n\n"
    "int main(int argc, char **argv)\n{\n    int total = 0;\n    for (int i = 0; i < argc; i++) {\n"
    "        total = add(total, atoi(argv[i]));\n    }\n    printf(\"%d\\n\", total);\n    return 0;\n}\n\n"
    "struct node {\n    struct node *next;\n    int value;\n};\n\n"
    "for (size_t i = 0; i < n; i++) {\n    sum += a[i] * b[i];\n}\n"
    "The weather today is sunny with a high of 25 degrees and a low of 14 degrees. Tomorrow there will be\n"
    "rain in the morning and clouds in the afternoon. In 2024 the team released version 1.0 of the library,\n"
    "followed by version 1.1 in March and version 2.0 in September.\n"
    "Please remember to save your work, close the window and turn off the computer before you leave.\n"
    "I think that the answer depends on what you want to do with the result, and on how much time you have.\n"
    "She said that she would come back later, but he was not sure whether he should wait for her or go home.\n";

/* GPT-2's byte order: printable bytes first, then the rest. */
static void gpt2_byte_order(int order[256])
{
    int n = 0, seen[256] = {0};
    for (int b = 0; b < 256; b++)
        if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) {
            order[n++] = b;
            seen[b] = 1;
        }
    for (int b = 0; b < 256; b++)
        if (!seen[b]) order[n++] = b;
}

/* GPT-2's byte -> code point mapping (for spelling tokens in the file). */
static void byte_spelling(const unsigned char *s, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int b = s[i], cp = b;
        if (!((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)) {
            /* the k-th non-printable byte maps to U+0100 + k */
            int k = 0;
            for (int x = 0; x < b; x++) k += !((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE);
            cp = 256 + k;
        }
        o += (size_t)rkm_utf8_encode((uint32_t)cp, out + o);
    }
    out[o] = 0;
}

typedef struct {
    int *sym; /* symbol ids */
    int n;
    int count;
} word;

static int char_class(unsigned char c)
{
    if ((c | 32) >= 'a' && (c | 32) <= 'z') return 1;
    if (c >= '0' && c <= '9') return 2;
    if (c == ' ' || c == '\n' || c == '\t') return 3;
    return 4;
}

/* GPT-2-like words: an optional space and a run of one class. */
static int split_words(word **out, int *n_out, const int byte_id[256])
{
    const unsigned char *s = (const unsigned char *)training_text;
    size_t n = sizeof training_text - 1;
    word *w = NULL;
    int nw = 0, cap = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        if (s[j] == ' ' && j + 1 < n && char_class(s[j + 1]) != 3) j++;
        int cls = char_class(s[j]);
        size_t e = j + 1;
        while (e < n && char_class(s[e]) == cls) e++;
        /* find an existing identical word */
        int found = -1;
        for (int k = 0; k < nw; k++)
            if ((size_t)w[k].n == e - i) {
                int same = 1;
                for (size_t q = 0; q < e - i && same; q++) same = w[k].sym[q] == byte_id[s[i + q]];
                if (same) {
                    found = k;
                    break;
                }
            }
        if (found >= 0) w[found].count++;
        else {
            if (nw == cap) {
                cap = cap ? cap * 2 : 256;
                word *nv = realloc(w, (size_t)cap * sizeof *nv);
                if (!nv) goto oom;
                w = nv;
            }
            w[nw].n = (int)(e - i);
            w[nw].count = 1;
            w[nw].sym = malloc((e - i) * sizeof(int));
            if (!w[nw].sym) goto oom;
            for (size_t q = 0; q < e - i; q++) w[nw].sym[q] = byte_id[s[i + q]];
            nw++;
        }
        i = e;
    }
    *out = w;
    *n_out = nw;
    return 0;
oom:
    for (int k = 0; k < nw; k++) free(w[k].sym);
    free(w);
    return RKM_ENOMEM;
}

static const char chatml_template[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

rkm_tokenizer *rkm_tokenizer_builtin(int n_vocab)
{
    if (n_vocab < 260 || n_vocab > (1 << 22)) {
        rkm_err(RKM_EINVAL, "builtin vocabulary: n_vocab %d must be in [260, 4194304]", n_vocab);
        return NULL;
    }
    int n_normal = n_vocab - 4;
    int order[256], byte_id[256];
    gpt2_byte_order(order);
    for (int i = 0; i < 256; i++) byte_id[order[i]] = i;
    /* token texts as raw bytes */
    unsigned char **tok = calloc((size_t)n_normal, sizeof *tok);
    int *tok_len = calloc((size_t)n_normal, sizeof *tok_len);
    int *merges = malloc((size_t)n_normal * 2 * sizeof *merges);
    word *w = NULL;
    int nw = 0, n_tok = 256, n_merge = 0;
    rkm_tokenizer *t = NULL;
    cJSON *root = NULL, *cfg = NULL;
    char *json = NULL, *cfg_json = NULL, *spell = NULL;
    if (!tok || !tok_len || !merges) goto oom;
    for (int i = 0; i < 256; i++) {
        tok[i] = malloc(1);
        if (!tok[i]) goto oom;
        tok[i][0] = (unsigned char)order[i];
        tok_len[i] = 1;
    }
    if (split_words(&w, &nw, byte_id)) goto oom;
    /* BPE training: merge the most frequent adjacent pair until the
     * vocabulary is full or no pair is left. Pair counts are recounted each
     * round: the text is small, and this keeps the rule obviously exact. */
    while (n_tok < n_normal) {
        long best = 0;
        int bl = -1, br = -1;
        /* count pairs with a hash-free scan: pairs of the current round are
         * few, so a small open table keyed by (l, r) is enough */
        size_t cap = 1 << 15;
        uint64_t *keys = calloc(cap, sizeof *keys);
        long *cnt = calloc(cap, sizeof *cnt);
        if (!keys || !cnt) {
            free(keys);
            free(cnt);
            goto oom;
        }
        for (int k = 0; k < nw; k++)
            for (int q = 0; q + 1 < w[k].n; q++) {
                uint64_t key = ((uint64_t)(uint32_t)w[k].sym[q] << 32 | (uint32_t)w[k].sym[q + 1]) + 1;
                size_t h = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 49) & (cap - 1);
                while (keys[h] && keys[h] != key) h = (h + 1) & (cap - 1);
                keys[h] = key;
                cnt[h] += w[k].count;
            }
        for (size_t h = 0; h < cap; h++) {
            if (!keys[h]) continue;
            int l = (int)((keys[h] - 1) >> 32), r = (int)((keys[h] - 1) & 0xffffffffu);
            if (cnt[h] > best || (cnt[h] == best && (l < bl || (l == bl && r < br)))) {
                best = cnt[h];
                bl = l;
                br = r;
            }
        }
        free(keys);
        free(cnt);
        if (best == 0) break;
        int len = tok_len[bl] + tok_len[br];
        unsigned char *txt = malloc((size_t)len);
        if (!txt) goto oom;
        memcpy(txt, tok[bl], (size_t)tok_len[bl]);
        memcpy(txt + tok_len[bl], tok[br], (size_t)tok_len[br]);
        int id = -1;
        for (int k = 256; k < n_tok && id < 0; k++)
            if (tok_len[k] == len && !memcmp(tok[k], txt, (size_t)len)) id = k;
        if (id < 0) {
            id = n_tok++;
            tok[id] = txt;
            tok_len[id] = len;
        } else {
            free(txt);
        }
        merges[2 * n_merge] = bl;
        merges[2 * n_merge + 1] = br;
        n_merge++;
        for (int k = 0; k < nw; k++) { /* apply the merge */
            int o = 0;
            for (int q = 0; q < w[k].n; q++) {
                if (q + 1 < w[k].n && w[k].sym[q] == bl && w[k].sym[q + 1] == br) {
                    w[k].sym[o++] = id;
                    q++;
                } else {
                    w[k].sym[o++] = w[k].sym[q];
                }
            }
            w[k].n = o;
        }
        if (n_merge >= n_normal * 2) break; /* only repeats of existing tokens: stop */
    }
    /* tokenizer.json */
    root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "version", "1.0");
    cJSON *added = cJSON_AddArrayToObject(root, "added_tokens");
    cJSON_AddNullToObject(root, "normalizer");
    cJSON *pre = cJSON_AddObjectToObject(root, "pre_tokenizer");
    cJSON_AddStringToObject(pre, "type", "ByteLevel");
    cJSON_AddBoolToObject(pre, "add_prefix_space", 0);
    cJSON_AddBoolToObject(pre, "trim_offsets", 1);
    cJSON_AddBoolToObject(pre, "use_regex", 1);
    cJSON_AddNullToObject(root, "post_processor");
    cJSON *dec = cJSON_AddObjectToObject(root, "decoder");
    cJSON_AddStringToObject(dec, "type", "ByteLevel");
    cJSON *model = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON *vocab = cJSON_AddObjectToObject(model, "vocab");
    cJSON *ml = cJSON_AddArrayToObject(model, "merges");
    int max_len = 1;
    for (int i = 0; i < n_tok; i++) max_len = RKM_MAX(max_len, tok_len[i]);
    spell = malloc((size_t)max_len * 2 + 1);
    if (!root || !vocab || !ml || !spell) goto oom;
    for (int i = 0; i < n_tok; i++) {
        byte_spelling(tok[i], (size_t)tok_len[i], spell);
        cJSON_AddNumberToObject(vocab, spell, i);
    }
    for (int r = 0; r < n_merge; r++) {
        cJSON *pair = cJSON_CreateArray();
        for (int k = 0; k < 2; k++) {
            int id = merges[2 * r + k];
            byte_spelling(tok[id], (size_t)tok_len[id], spell);
            cJSON_AddItemToArray(pair, cJSON_CreateString(spell));
        }
        cJSON_AddItemToArray(ml, pair);
    }
    char name[48];
    for (int i = n_tok; i < n_vocab; i++) {
        int k = i - (n_vocab - 4);
        static const char *const ctl[4] = {"<|endoftext|>", "<|pad|>", "<|im_start|>", "<|im_end|>"};
        if (k >= 0) snprintf(name, sizeof name, "%s", ctl[k]);
        else snprintf(name, sizeof name, "<|reserved_%d|>", i - n_tok);
        cJSON *a = cJSON_CreateObject();
        cJSON_AddNumberToObject(a, "id", i);
        cJSON_AddStringToObject(a, "content", name);
        cJSON_AddBoolToObject(a, "special", 1);
        cJSON_AddItemToArray(added, a);
    }
    cfg = cJSON_CreateObject();
    cJSON_AddStringToObject(cfg, "bos_token", "<|endoftext|>");
    cJSON_AddStringToObject(cfg, "eos_token", "<|endoftext|>");
    cJSON_AddStringToObject(cfg, "pad_token", "<|pad|>");
    cJSON_AddBoolToObject(cfg, "add_bos_token", 0);
    cJSON_AddStringToObject(cfg, "chat_template", chatml_template);
    json = cJSON_PrintUnformatted(root);
    cfg_json = cJSON_PrintUnformatted(cfg);
    if (!json || !cfg_json) goto oom;
    t = rkm_tokenizer_from_json(json, strlen(json), cfg_json, strlen(cfg_json));
    goto done;
oom:
    rkm_err(RKM_ENOMEM, "builtin vocabulary: out of memory");
done:
    if (tok)
        for (int i = 0; i < n_normal; i++) free(tok[i]);
    free(tok);
    free(tok_len);
    free(merges);
    for (int k = 0; k < nw; k++) free(w[k].sym);
    free(w);
    free(spell);
    cJSON_Delete(root);
    cJSON_Delete(cfg);
    cJSON_free(json);
    cJSON_free(cfg_json);
    return t;
}
