/* log: leveled diagnostics on stderr (see log.h). */
#include "core/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

enum log_level log_threshold = LOG_WARN;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

int log_level_parse(const char *name, enum log_level *out)
{
    for (int i = 0; i <= LOG_DEBUG; i++) {
        if (strcmp(name, level_names[i]) == 0) {
            *out = (enum log_level)i;
            return 0;
        }
    }
    return -EINVAL;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
    if (level > log_threshold) return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char line[2048];
    int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s exec-server: ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, ts.tv_nsec / 1000000, level_names[level]);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof line) vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    /* One write per line so concurrent writers do not interleave mid-line. */
    fprintf(stderr, "%s\n", line);
}

const char *log_value(const char *s, char *out, size_t n)
{
    bool bare = *s != '\0';
    for (const char *p = s; *p && bare; p++)
        bare = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
               strchr("._:/@+-", *p);
    if (bare) {
        snprintf(out, n, "%s", s);
        return out;
    }
    size_t k = 0;
    if (k + 1 < n) out[k++] = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p && k + 5 < n; p++) {
        if (*p == '"' || *p == '\\') {
            out[k++] = '\\';
            out[k++] = (char)*p;
        } else if (*p < 0x20 || *p >= 0x7f) {
            k += (size_t)snprintf(out + k, n - k, "\\x%02x", *p);
        } else {
            out[k++] = (char)*p;
        }
    }
    if (k + 1 < n) out[k++] = '"';
    out[k < n ? k : n - 1] = '\0';
    return out;
}
