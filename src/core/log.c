/* log: leveled diagnostics on stderr (see log.h). */
#include "core/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/env_vars.h"

enum log_level log_threshold = LOG_NOTICE;

static const char *const level_names[] = {"error", "warn", "notice", "info", "debug"};
/* syslog priorities (sd-daemon.h's SD_ERR ... SD_DEBUG) of the levels above. */
static const char priorities[] = {'3', '4', '5', '6', '7'};

/* systemd sets JOURNAL_STREAM=DEV:INO for a service whose stderr (or stdout) is
 * connected to the journal; it counts only while stderr is still that stream
 * (a child of the service may have its stderr redirected). */
bool log_to_journal(void)
{
    static int cached = -1;
    if (cached >= 0) return cached;
    cached = 0;
    const char *js = env_vars.journal_stream;
    unsigned long long dev, ino;
    struct stat st;
    if (js && sscanf(js, "%llu:%llu", &dev, &ino) == 2 && fstat(STDERR_FILENO, &st) == 0)
        cached = (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
    return cached;
}

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

/* The escape of a control character (C0 or DEL) into out: \n, \t, \r or \xNN as
 * two or four characters; their count, or 0 when c needs none. */
static size_t escape_control(unsigned char c, char out[5])
{
    static const char named[] = {['\n'] = 'n', ['\t'] = 't', ['\r'] = 'r'};
    if (c >= 0x20 && c != 0x7f) return 0;
    out[0] = '\\';
    if (c < sizeof named && named[c]) {
        out[1] = named[c];
        return 2;
    }
    snprintf(out + 1, 4, "x%02x", c);
    return 4;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
    if (level > log_threshold) return;
    char line[2048];
    int n;
    if (log_to_journal()) {
        /* The journal stamps the time and reads the priority from the prefix. */
        n = snprintf(line, sizeof line, "<%c>", priorities[level]);
    } else {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        struct tm tm;
        gmtime_r(&ts.tv_sec, &tm);
        n = snprintf(line, sizeof line,
                     "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-6s exec-server: ", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     ts.tv_nsec / 1000000, level_names[level]);
    }
    char text[sizeof line];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    /* Whatever a value carries (a libpq message's "\n\t", a client's string), the
     * event stays one line for grep, journald and Loki: every control character is
     * escaped here, once, for every message. */
    size_t k = n > 0 && (size_t)n < sizeof line ? (size_t)n : 0;
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        char esc[5];
        size_t e = escape_control(*p, esc);
        if (e == 0) {
            esc[0] = (char)*p;
            e = 1;
        }
        if (k + e >= sizeof line) break;
        memcpy(line + k, esc, e);
        k += e;
    }
    line[k] = '\0';
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
        } else if (*p < 0x20 || *p == 0x7f) {
            char esc[5];
            size_t e = escape_control(*p, esc);
            memcpy(out + k, esc, e);
            k += e;
        } else if (*p > 0x7f) {
            k += (size_t)snprintf(out + k, n - k, "\\x%02x", *p);
        } else {
            out[k++] = (char)*p;
        }
    }
    if (k + 1 < n) out[k++] = '"';
    out[k < n ? k : n - 1] = '\0';
    return out;
}
