/*
 * err.c - per-thread error messages and rkm_strerror (from the X-macro
 * table in rkmojo.h). Each thread has its own buffer: no locking.
 */
#include "util/common.h"

static _Thread_local char err_msg[1024];

const char *rkm_strerror(int code)
{
    switch (code) {
#define RKM__CASE(name, val, text) case val: return text;
        RKM_ERRORS(RKM__CASE)
#undef RKM__CASE
    }
    return "unknown error";
}

const char *rkm_last_error(void) { return err_msg; }

int rkm_err(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_msg, sizeof err_msg, fmt, ap);
    va_end(ap);
    return code;
}

int rkm_err_prefix(int code, const char *fmt, ...)
{
    char prefix[512], old[sizeof err_msg];
    memcpy(old, err_msg, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    /* prefix + ": " + old, cut to the buffer (snprintf would warn about
     * the possible truncation, which is intended here) */
    size_t np = strlen(prefix), no = strlen(old), k = 0;
    for (size_t i = 0; i < np && k + 1 < sizeof err_msg; i++) err_msg[k++] = prefix[i];
    for (size_t i = 0; i < 2 && k + 1 < sizeof err_msg; i++) err_msg[k++] = ": "[i];
    for (size_t i = 0; i < no && k + 1 < sizeof err_msg; i++) err_msg[k++] = old[i];
    err_msg[k] = 0;
    return code;
}
