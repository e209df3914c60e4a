/*
 * test-vision.c - images made into a vision tower's input and encoded
 * (runtime/vision_prep.c, runtime/vision_encoder.c), on their own; the
 * comparison with llama.cpp's mtmd is tests/test-vision-ref.sh.
 *  - preparation: an image already at the tower's size is only
 *    normalised, (x / 255 - mean) / std per channel, in planes; a 3x3
 *    image made 4x4 by the bilinear filter with aligned corners, each
 *    value truncated, as worked out by hand; a wide image letterboxed
 *    (black rows above and below, the picture centred);
 *  - the Gemma 4 tower of synth's tiny-gemma4: as many tokens as the
 *    resize rule gives, finite, the same bytes on 1 and 2 threads and on
 *    a second run; a size that is not a grid of cells and a grid wider
 *    than the position table refused with a message; a missing or a
 *    non-mmproj file refused at load;
 *  - convert --mmproj: the tower carried into the model directory as
 *    mmproj.gguf with its size and checksum in the manifest, verified by
 *    rkm_model_dir_verify (a flipped byte named); a tower projecting to
 *    another width than the text model's and a file that is not a tower
 *    refused before anything is written;
 *  - prompts with images (runtime/media.c): markers and images that do
 *    not pair up refused, named; an image's rows as media ids between
 *    the projector's text; a session whose prefill chunk cannot hold an
 *    image refused; a follow-up turn holding the first turn's image in
 *    its prefix encodes only the new image, with logits bit-equal to a
 *    fresh session's, and a cut into an image's rows evaluates the image
 *    again from its start.
 */
#include <math.h>
#include <unistd.h>

#include "common/test.h"
#include "convert/convert.h"
#include "convert/synth.h"
#include "format/model_dir.h"
#include "format/gguf.h"
#include "kernels/quant.h"
#include "runtime/media.h"
#include "runtime/vision.h"
#include "util/common.h"

static void test_prep(void)
{
    rkm_vision_hparams vp = {.proj = RKM_PROJ_GEMMA4V, .patch_size = 1, .n_merge = 2, .min_pixels = 4,
                             .max_pixels = 1 << 20, .mean = {0.5f, 0.25f, 0.0f}, .std = {0.5f, 1.0f, 2.0f}};
    /* 4x2: already a grid of 2-pixel cells */
    uint8_t rgb[4 * 2 * 3];
    for (int i = 0; i < 24; i++) rgb[i] = (uint8_t)(i * 10);
    float *f = NULL;
    int tw, th;
    CHECK(rkm_vision_prep(&vp, rgb, 4, 2, &f, &tw, &th) == 0);
    CHECK(tw == 4 && th == 2);
    for (int c = 0; f && c < 3; c++)
        for (int i = 0; i < 8; i++)
            CHECK_NEAR(f[c * 8 + i], ((float)rgb[i * 3 + c] / 255.0f - vp.mean[c]) / vp.std[c], 0);
    free(f);
    /* 3x3 to 4x4: x ratio 2/3; pixel (1, 0) = p(0,0) + (p(1,0) - p(0,0)) * 2/3, truncated */
    uint8_t g[9 * 3];
    for (int i = 0; i < 27; i++) g[i] = (uint8_t)(i * 9 + 1);
    CHECK(rkm_vision_prep(&vp, g, 3, 3, &f, &tw, &th) == 0);
    CHECK(tw == 4 && th == 4);
    if (f) {
        const float want = (float)(uint8_t)(1.0f + (28.0f - 1.0f) * (2.0f / 3.0f));
        CHECK_NEAR(f[1], (want / 255.0f - 0.5f) / 0.5f, 1e-6);
        CHECK_NEAR(f[0], (1.0f / 255.0f - 0.5f) / 0.5f, 1e-6);            /* corners aligned */
        CHECK_NEAR(f[15], ((float)g[8 * 3] / 255.0f - 0.5f) / 0.5f, 1e-6); /* the last pixel */
    }
    free(f);
    /* 8x2 (16 pixels, under the 32 of the minimum): scaled by sqrt 2 to 12x4;
     * the picture, 1.5 times as large (12x3), at the top of the letterbox
     * (offset (4 - 3) / 2 = 0), its last row black */
    vp.min_pixels = 32;
    uint8_t wide[8 * 2 * 3];
    memset(wide, 200, sizeof wide);
    CHECK(rkm_vision_prep(&vp, wide, 8, 2, &f, &tw, &th) == 0);
    CHECK(tw == 12 && th == 4);
    if (f && tw == 12 && th == 4) {
        CHECK_NEAR(f[0], (200.0f / 255.0f - 0.5f) / 0.5f, 1e-6);  /* row 0: the picture */
        CHECK_NEAR(f[2 * 12 + 11], (200.0f / 255.0f - 0.5f) / 0.5f, 1e-6);
        CHECK_NEAR(f[3 * 12], (0.0f - 0.5f) / 0.5f, 0);           /* row 3: black */
        CHECK_NEAR(f[3 * 12 + 11], (0.0f - 0.5f) / 0.5f, 0);
    }
    free(f);
    CHECK(rkm_vision_prep(&vp, wide, 0, 2, &f, &tw, &th) != 0 && !f);
}

/* A preset's tower (n_out floats per image token, cells of cell
 * pixels): the same rows on 1 and 2 threads and twice, finite; images
 * that are not a grid of cells, or larger than the position table allows
 * (gemma4v; qwen3vl resizes its table), refused. */
static void test_encoder(const char *preset, int n_out, int cell)
{
    char gg[1024], mm[1024];
    snprintf(gg, sizeof gg, "%s/v-%s.gguf", test_tmpdir(), preset);
    snprintf(mm, sizeof mm, "%s/v-%s-mmproj.gguf", test_tmpdir(), preset);
    rkm_synth_opts o = {.preset = preset, .seed = 9, .dtype = RKM_TYPE_F16, .mmproj_out = mm};
    CHECK_MSG(rkm_synth(&o, gg) == 0, "%s", rkm_last_error());
    rkm_vision *v = rkm_vision_load(mm);
    CHECK_MSG(v != NULL, "%s", rkm_last_error());
    if (!v) return;
    CHECK(rkm_vision_supported(v) == 0);
    const rkm_vision_hparams *hp = rkm_vision_hparams_of(v);
    CHECK_EQ_INT(rkm_vision_n_out(v), n_out);
    CHECK_EQ_INT(hp->patch_size * hp->n_merge, cell);
    CHECK(rkm_vision_bytes(v) > 0);
    /* a 200x120 picture */
    const int w = 200, h = 120;
    uint8_t *rgb = malloc((size_t)w * h * 3);
    for (int i = 0; i < w * h * 3; i++) rgb[i] = (uint8_t)((i * 37) ^ (i >> 5));
    float *img = NULL;
    int tw, th, want_tw, want_th;
    const int want = rkm_vision_fit(hp, w, h, &want_tw, &want_th);
    CHECK(rkm_vision_prep(hp, rgb, w, h, &img, &tw, &th) == 0);
    CHECK(tw == want_tw && th == want_th);
    rkm_pool *p1 = rkm_pool_new(1), *p2 = rkm_pool_new(2);
    float *a = NULL, *b = NULL, *c = NULL;
    int na = 0, nb = 0, nc = 0;
    CHECK_MSG(rkm_vision_encode(v, p1, img, tw, th, &a, &na) == 0, "%s", rkm_last_error());
    CHECK(rkm_vision_encode(v, p2, img, tw, th, &b, &nb) == 0);
    CHECK(rkm_vision_encode(v, p2, img, tw, th, &c, &nc) == 0);
    CHECK_EQ_INT(na, want);
    CHECK(na == nb && nb == nc);
    if (a && b && c && na == nb && nb == nc) {
        int finite = 1;
        for (int i = 0; i < na * n_out; i++) finite &= isfinite(a[i]);
        CHECK(finite);
        CHECK(!memcmp(a, b, sizeof(float) * (size_t)na * n_out));
        CHECK(!memcmp(b, c, sizeof(float) * (size_t)na * n_out));
    }
    free(a);
    free(b);
    free(c);
    /* not a grid of cells */
    CHECK(rkm_vision_encode(v, p1, img, tw - 16, th, &a, &na) != 0 && strstr(rkm_last_error(), "not a grid"));
    if (hp->proj == RKM_PROJ_GEMMA4V) {
        /* 8208 = 171 cells of 48: 513 patches a row, the table has 512 */
        float *big = calloc((size_t)3 * 8208 * 48, sizeof(float));
        CHECK(rkm_vision_encode(v, p1, big, 8208, 48, &a, &na) != 0 && strstr(rkm_last_error(), "position table"));
        CHECK(a == NULL);
        free(big);
    }
    free(img);
    free(rgb);
    rkm_pool_free(p1);
    rkm_pool_free(p2);
    rkm_vision_free(v);
    /* not mmproj files */
    CHECK(rkm_vision_load(gg) == NULL && strstr(rkm_last_error(), "no vision encoder"));
    char none[1024];
    snprintf(none, sizeof none, "%s/none.gguf", test_tmpdir());
    CHECK(rkm_vision_load(none) == NULL);
}

static void test_convert_mmproj(void)
{
    char gg[1024], mm[1024], out[1024], p[1100];
    snprintf(gg, sizeof gg, "%s/c.gguf", test_tmpdir());
    snprintf(mm, sizeof mm, "%s/c-mmproj.gguf", test_tmpdir());
    snprintf(out, sizeof out, "%s/c.rkmojo", test_tmpdir());
    rkm_synth_opts so = {.preset = "tiny-gemma4", .seed = 4, .dtype = RKM_TYPE_F32, .mmproj_out = mm};
    CHECK_MSG(rkm_synth(&so, gg) == 0, "%s", rkm_last_error());
    rkm_convert_opts co = {.quant = "keep", .mmproj = mm};
    CHECK_MSG(rkm_convert(gg, out, &co) == 0, "%s", rkm_last_error());
    rkm_model_dir *md = rkm_model_dir_open(out);
    CHECK_MSG(md != NULL, "%s", rkm_last_error());
    if (!md) return;
    CHECK_STR_EQ(md->mmproj_file, "mmproj.gguf");
    uint64_t n = 0, h = 0;
    CHECK(rkm_hash_file(mm, &n, &h) == 0);
    CHECK(md->mmproj_bytes == n && md->mmproj_checksum == h && n > 0);
    CHECK_MSG(rkm_model_dir_verify(md) == 0, "%s", rkm_last_error());
    snprintf(p, sizeof p, "%s/mmproj.gguf", out);
    FILE *f = fopen(p, "r+b");
    CHECK(f != NULL);
    if (f) {
        fseek(f, (long)(n / 2), SEEK_SET);
        int c = fgetc(f);
        fseek(f, (long)(n / 2), SEEK_SET);
        fputc(c ^ 0x40, f);
        fclose(f);
    }
    CHECK(rkm_model_dir_verify(md) == RKM_ECHECKSUM && strstr(rkm_last_error(), "mmproj.gguf"));
    rkm_model_dir_close(md);
    /* a text model of another width */
    char wide[1024], wout[1024];
    snprintf(wide, sizeof wide, "%s/wide.gguf", test_tmpdir());
    snprintf(wout, sizeof wout, "%s/wide.rkmojo", test_tmpdir());
    static const char *const sets[] = {"n_embd=256"};
    rkm_synth_opts ws = {.preset = "tiny", .seed = 4, .dtype = RKM_TYPE_F32, .sets = sets, .n_sets = 1};
    CHECK_MSG(rkm_synth(&ws, wide) == 0, "%s", rkm_last_error());
    CHECK(rkm_convert(wide, wout, &co) != 0 && strstr(rkm_last_error(), "projects to 128, the text model is 256 wide"));
    CHECK(access(wout, F_OK) != 0);
    /* not a tower */
    rkm_convert_opts bad = {.quant = "keep", .mmproj = wide};
    CHECK(rkm_convert(gg, wout, &bad) != 0 && strstr(rkm_last_error(), "no vision encoder"));
    CHECK(access(wout, F_OK) != 0);
}

/* An RGB image of w x h with a pattern of seed. */
static rkm_image pattern(int w, int h, int seed)
{
    rkm_image im = {w, h, malloc((size_t)w * (size_t)h * 3)};
    for (int i = 0; i < w * h * 3; i++) im.rgb[i] = (uint8_t)((i * 7 + seed * 31 + (i / (3 * w)) * 5) & 0xff);
    return im;
}

/* The logits after the prompt, from a fresh session of m. */
static float max_abs_diff(const float *a, const float *b, int n)
{
    float md = 0;
    for (int i = 0; i < n; i++) md = fmaxf(md, fabsf(a[i] - b[i]));
    return md;
}

static int fresh_logits(rkm_model *m, const rkm_media_prompt *p, rkm_vision *v, rkm_pool *pool, float *out)
{
    rkm_session_params sp;
    rkm_session_params_default(&sp);
    sp.n_chunk = 64;
    rkm_session *s = rkm_session_new(m, &sp);
    int rc = s ? rkm_media_prompt_eval(s, p, v, pool, NULL) : -1;
    if (!rc) rc = rkm_session_eval(s, NULL, 0, out);
    rkm_session_free(s);
    return rc;
}

/* A preset's text model converted with --quant keep and its tower, seed
 * 5, f32, opened (files named by tag in the test directory); 0 when all
 * three are there. */
static int open_pair(const char *preset, const char *tag, rkm_model **m, rkm_vision **v, rkm_pool **pool)
{
    char gg[1024], mm[1024], out[1024];
    snprintf(gg, sizeof gg, "%s/%s.gguf", test_tmpdir(), tag);
    snprintf(mm, sizeof mm, "%s/%s-mmproj.gguf", test_tmpdir(), tag);
    snprintf(out, sizeof out, "%s/%s.rkmojo", test_tmpdir(), tag);
    rkm_synth_opts so = {.preset = preset, .seed = 5, .dtype = RKM_TYPE_F32, .mmproj_out = mm};
    CHECK_MSG(rkm_synth(&so, gg) == 0, "%s", rkm_last_error());
    rkm_convert_opts co = {.quant = "keep"};
    CHECK_MSG(rkm_convert(gg, out, &co) == 0, "%s", rkm_last_error());
    rkm_model_params mp;
    rkm_model_params_default(&mp);
    mp.n_threads = 2;
    *m = rkm_model_open(out, &mp);
    *v = rkm_vision_load(mm);
    *pool = rkm_pool_new(2);
    CHECK_MSG(*m && *v && *pool, "%s", rkm_last_error());
    return *m && *v && *pool ? 0 : -1;
}

static void test_media_prompt(void)
{
    rkm_model *m = NULL;
    rkm_vision *v = NULL;
    rkm_pool *pool = NULL;
    if (open_pair("tiny-gemma4", "m", &m, &v, &pool)) goto done;
    const rkm_vision_hparams *vp = rkm_vision_hparams_of(v);
    /* ids before encoding: the images' rows as media ids between the
     * projector's text; markers and images must pair up */
    rkm_image im[2] = {pattern(64, 48, 1), pattern(48, 64, 2)};
    rkm_media_prompt p1 = {0}, p2 = {0};
    CHECK(rkm_media_prompt_build(m, vp, "one " RKM_MEDIA_MARKER " two " RKM_MEDIA_MARKER, im, 1, 1, &p1) == RKM_EINVAL &&
          strstr(rkm_last_error(), "2 image markers (<__media__>) and 1 image is given"));
    CHECK(im[0].rgb == NULL); /* taken and freed on failure too */
    im[0] = pattern(64, 48, 1);
    CHECK_MSG(rkm_media_prompt_build(m, vp, "Look: " RKM_MEDIA_MARKER " what?", im, 1, 1, &p1) == 0, "%s",
              rkm_last_error());
    CHECK(p1.n_img == 1 && p1.bidirectional == 1 && p1.img[0].n_tokens > 0);
    int text_neg = 0, rows_neg = 0;
    for (int i = 0; i < p1.n_ids; i++) {
        const int in_img = i >= p1.img[0].pos && i < p1.img[0].pos + p1.img[0].n_tokens;
        if (p1.ids[i] < -1) rows_neg += in_img;
        else text_neg += p1.ids[i] < 0;
    }
    CHECK(text_neg == 0 && rows_neg == p1.img[0].n_tokens);
    CHECK(rkm_media_token(p1.img[0].key, 0) != rkm_media_token(p1.img[0].key + 1, 0));
    /* a session of chunks smaller than the image: refused, named */
    rkm_session_params sp;
    rkm_session_params_default(&sp);
    sp.n_chunk = 8;
    rkm_session *s = rkm_session_new(m, &sp);
    CHECK(s && rkm_media_prompt_eval(s, &p1, v, pool, NULL) == RKM_EINVAL && strstr(rkm_last_error(), "(n_chunk)"));
    rkm_session_free(s);
    /* the follow-up turn holding the first as its prefix: the image is
     * not encoded again, and the logits are a fresh session's */
    sp.n_chunk = 64;
    s = rkm_session_new(m, &sp);
    int enc = -1;
    CHECK_MSG(s && rkm_media_prompt_eval(s, &p1, v, pool, &enc) == 0, "%s", rkm_last_error());
    CHECK(enc == 1);
    CHECK(rkm_media_prompt_eval(s, &p1, v, pool, &enc) == 0 && enc == 0);
    im[0] = pattern(64, 48, 1);
    CHECK_MSG(rkm_media_prompt_build(m, vp, "Look: " RKM_MEDIA_MARKER " what? And " RKM_MEDIA_MARKER "?", im, 2, 1, &p2) ==
                  0,
              "%s", rkm_last_error());
    CHECK(p2.img[0].key == p1.img[0].key && p2.img[1].key != p1.img[0].key);
    CHECK(rkm_media_prompt_eval(s, &p2, v, pool, &enc) == 0 && enc == 1);
    const int nv = rkm_model_n_vocab(m);
    float *a = malloc(sizeof(float) * (size_t)nv), *b = malloc(sizeof(float) * (size_t)nv);
    CHECK(rkm_session_eval(s, NULL, 0, a) == 0);
    CHECK(fresh_logits(m, &p2, v, pool, b) == 0);
    float md = max_abs_diff(a, b, nv);
    CHECK_MSG(md == 0, "logits of the follow-up differ from a fresh session's by %g", md);
    /* a cut into the image's rows goes back to its start, evaluated again */
    CHECK(rkm_session_truncate(s, p2.img[1].pos + 1) == 0);
    CHECK(rkm_media_prompt_eval(s, &p2, v, pool, &enc) == 0 && enc == 1);
    CHECK(rkm_session_eval(s, NULL, 0, a) == 0);
    md = max_abs_diff(a, b, nv);
    CHECK_MSG(md == 0, "logits after re-evaluating the image differ by %g", md);
    free(a);
    free(b);
    rkm_session_free(s);
    rkm_media_prompt_free(&p1);
    rkm_media_prompt_free(&p2);
done:
    rkm_pool_free(pool);
    rkm_vision_free(v);
    rkm_model_close(m);
}

/* Qwen3-VL's text model with images: an image takes max(nx, ny)
 * positions for its nx x ny rows (rkm_session_n_pos), a follow-up turn
 * holding the first as its prefix gives a fresh session's logits, and a
 * session saved and loaded goes on at the same positions (the same
 * logits as the one that was not). */
static void test_media_qwen3vl(void)
{
    char sv[1024];
    snprintf(sv, sizeof sv, "%s/q.session", test_tmpdir());
    rkm_model *m = NULL;
    rkm_vision *v = NULL;
    rkm_pool *pool = NULL;
    if (open_pair("tiny-qwen3vl", "q", &m, &v, &pool)) goto done;
    const rkm_vision_hparams *vp = rkm_vision_hparams_of(v);
    rkm_image im[2] = {pattern(160, 64, 1), pattern(48, 64, 2)};
    rkm_media_prompt p1 = {0}, p2 = {0};
    CHECK_MSG(rkm_media_prompt_build(m, vp, "Look: " RKM_MEDIA_MARKER " what?", im, 1, 1, &p1) == 0, "%s",
              rkm_last_error());
    CHECK(p1.bidirectional == 0 && p1.img[0].nx > 0 && p1.img[0].n_tokens % p1.img[0].nx == 0);
    const int nx = p1.img[0].nx, ny = p1.img[0].n_tokens / nx;
    CHECK(nx != ny);
    rkm_session_params sp;
    rkm_session_params_default(&sp);
    sp.n_chunk = 64;
    rkm_session *s = rkm_session_new(m, &sp), *t = rkm_session_new(m, &sp);
    CHECK(s && t && rkm_session_n_embd_in(s) == rkm_vision_n_out(v));
    CHECK_MSG(rkm_media_prompt_eval(s, &p1, v, pool, NULL) == 0, "%s", rkm_last_error());
    CHECK_EQ_INT(rkm_session_n_past(s), p1.n_ids);
    CHECK_EQ_INT(rkm_session_n_pos(s), p1.n_ids - p1.img[0].n_tokens + (nx > ny ? nx : ny));
    im[0] = pattern(160, 64, 1);
    CHECK_MSG(rkm_media_prompt_build(m, vp, "Look: " RKM_MEDIA_MARKER " what? And " RKM_MEDIA_MARKER "?", im, 2, 1, &p2) ==
                  0,
              "%s", rkm_last_error());
    int enc = -1;
    CHECK(rkm_media_prompt_eval(s, &p2, v, pool, &enc) == 0 && enc == 1);
    const int nv = rkm_model_n_vocab(m);
    float *a = malloc(sizeof(float) * (size_t)nv), *b = malloc(sizeof(float) * (size_t)nv);
    CHECK(rkm_session_eval(s, NULL, 0, a) == 0);
    CHECK(fresh_logits(m, &p2, v, pool, b) == 0);
    float md = max_abs_diff(a, b, nv);
    CHECK_MSG(md == 0, "logits of the follow-up differ from a fresh session's by %g", md);
    /* saved and loaded: the next tokens at the same positions */
    CHECK_MSG(rkm_session_save(s, sv) == 0, "%s", rkm_last_error());
    CHECK_MSG(rkm_session_load(t, sv) == 0, "%s", rkm_last_error());
    CHECK_EQ_INT(rkm_session_n_pos(t), rkm_session_n_pos(s));
    const int32_t more[3] = {11, 12, 13};
    CHECK(rkm_session_eval(s, more, 3, a) == 0 && rkm_session_eval(t, more, 3, b) == 0);
    md = max_abs_diff(a, b, nv);
    CHECK_MSG(md == 0, "logits after a load differ by %g", md);
    free(a);
    free(b);
    rkm_session_free(s);
    rkm_session_free(t);
    rkm_media_prompt_free(&p1);
    rkm_media_prompt_free(&p2);
done:
    rkm_pool_free(pool);
    rkm_vision_free(v);
    rkm_model_close(m);
}

/* The fuzz corpus's qwen3vl_merger seed (a tower llama.cpp's converter
 * wrote): read and encoded. */
static void test_seed_tower(void)
{
    const char *seed = "fuzz/corpus/gguf/9856b684dde6b8cf4433e6d7d415efd39e3529e5";
    if (access(seed, R_OK)) {
        printf("skip: %s not found (run from the repository)\n", seed);
        return;
    }
    rkm_vision *v = rkm_vision_load(seed);
    CHECK_MSG(v != NULL, "%s", rkm_last_error());
    if (!v) return;
    const rkm_vision_hparams *hp = rkm_vision_hparams_of(v);
    CHECK(hp->proj == RKM_PROJ_QWEN3VL);
    CHECK(rkm_vision_supported(v) == 0);
    const int w = 64, h = 96;
    uint8_t *rgb = malloc((size_t)w * h * 3);
    for (int i = 0; i < w * h * 3; i++) rgb[i] = (uint8_t)(i * 13);
    float *img = NULL, *out = NULL;
    int tw, th, n = 0;
    rkm_pool *pool = rkm_pool_new(2);
    CHECK(rkm_vision_prep(hp, rgb, w, h, &img, &tw, &th) == 0);
    CHECK_MSG(img && rkm_vision_encode(v, pool, img, tw, th, &out, &n) == 0, "%s", rkm_last_error());
    CHECK_EQ_INT(n, (tw / (hp->patch_size * 2)) * (th / (hp->patch_size * 2)));
    int finite = 1;
    for (int i = 0; out && i < n * rkm_vision_n_out(v); i++) finite &= isfinite(out[i]);
    CHECK(out && finite);
    free(out);
    free(img);
    free(rgb);
    rkm_pool_free(pool);
    rkm_vision_free(v);
}

int main(void)
{
    rkm_kernels_init();
    test_seed_tower();
    test_prep();
    test_encoder("tiny-gemma4", 128, 48);
    test_encoder("tiny-qwen3vl", 384, 32);
    test_convert_mmproj();
    test_media_prompt();
    test_media_qwen3vl();
    return test_done();
}
