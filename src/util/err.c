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
    snprintf(err_msg, sizeof err_msg, "%s: %s", prefix, old);
    return code;
}
