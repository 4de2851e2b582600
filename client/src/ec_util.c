/* ec_util: what every module of the client library shares and that depends on none of
 * them: filling an ec_error, the monotonic clock with its deadlines, and string
 * vectors. Kept out of ec_client.c so that the modules below the client (the
 * connection, the message layers, the file and tcp helpers) do not call back up into
 * it for these. */
#include "ec_util.h"

#include "util/mem.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int ec_fail(ec_error *err, ec_err_kind kind, int64_t code, const char *fmt, ...)
{
    if (err) {
        err->kind = kind;
        err->code = code;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return -(int)kind;
}

int64_t ec_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int ec_remaining(int64_t deadline)
{
    if (deadline < 0) return -1;
    int64_t r = deadline - ec_now_ms();
    if (r < 0) return 0;
    return r > 0x3fffffff ? 0x3fffffff : (int)r;
}

int64_t ec_deadline(int timeout_ms)
{
    return timeout_ms < 0 ? -1 : ec_now_ms() + timeout_ms;
}

char **ec_strv_dup(const char *const *v)
{
    if (!v) return NULL;
    size_t n = 0;
    while (v[n])
        n++;
    char **out = xcalloc(n + 1, sizeof *out);
    for (size_t i = 0; i < n; i++)
        out[i] = xstrdup(v[i]);
    return out;
}

void ec_strv_free(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}
