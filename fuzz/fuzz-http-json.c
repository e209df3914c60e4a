/* fuzz-http-json.c - libFuzzer target: the server's request parsing and
 * validation (src/server/api.h) on arbitrary bytes. The first byte picks
 * the endpoint (OpenAI chat / completion / embeddings, Ollama chat /
 * generate / embed, /api/show's model name, durations), the rest is the
 * body. What parses is then formatted back (result, stream chunk, stream
 * end, embeddings), its sampler fields are laid over the defaults, and its
 * stop strings drive the streaming text output (rkm_textout) over the
 * body's bytes. Any result is fine; crashes, leaks and sanitizer
 * reports are not. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/api.h"
#include "server/fields.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    int sel = data[0] % (SRV_KIND_COUNT + 2);
    const char *body = (const char *)data + 1;
    size_t n = size - 1;
    char err[256];
    if (sel == SRV_KIND_COUNT) {
        char *name = NULL;
        if (srv_parse_model_name(body, n, &name, err, sizeof err) == 0) {
            char base[160];
            srv_model_name_base(name, base, sizeof base);
            (void)srv_model_name_ok(base);
        }
        free(name);
        return 0;
    }
    if (sel == SRV_KIND_COUNT + 1) {
        char *s = malloc(n + 1);
        if (!s) return 0;
        memcpy(s, body, n);
        s[n] = 0;
        double d;
        (void)srv_parse_duration(s, &d);
        (void)srv_model_name_ok(s);
        free(s);
        return 0;
    }
    srv_request r;
    if (srv_parse_request(sel, body, n, &r, err, sizeof err)) return 0;
    srv_result res = {.model = r.model, .id = "x", .created = 1, .text = r.prompt ? r.prompt : "",
                      .finish = "stop", .n_prompt = 3, .n_cached = 1, .n_gen = 2};
    free(srv_fmt_result(&r, &res));
    free(srv_fmt_chunk(&r, &res, r.n_msgs ? r.msgs[0].content : "", 1));
    free(srv_fmt_stream_end(&r, &res));
    free(srv_fmt_stream_error(&r, err));
    free(srv_fmt_error(r.kind, 400, r.model));
    float v[4] = {0.5f, -1.0f, 0.0f, 2.0f};
    free(srv_fmt_embeddings(&r, r.model, v, 1, 4, 1, 0.1, 0.0));
    /* the request's stop strings over the body, in 3-byte pieces */
    rkm_textout *t = rkm_textout_new(NULL, (const char *const *)r.stop, r.n_stop);
    const char *o;
    size_t len;
    for (size_t i = 0; t && i < n; i += 3)
        if (rkm_textout_push_bytes(t, body + i, n - i < 3 ? n - i : 3, &o, &len)) break;
    if (t) (void)rkm_textout_flush(t, &o, &len);
    rkm_textout_free(t);
    rkm_sampler_params sp;
    rkm_sampler_params_default(&sp);
    srv_request_sampler(&r, &sp);
    srv_request_free(&r);
    return 0;
}
