/*
 * escape_probe_common: the output and argument helpers every attempt uses:
 * one tab-separated result line per outcome (see escape_probe.c), the errno's name as
 * the result, and the small parsers of "A:B", escaped text and pids.
 * Part of escape-probe (escape_probe.c); a test tool, not part of the server.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "escape_probe.h"

const char *probe_errname(int err)
{
    static char buf[32];
    const char *n = err ? strerrorname_np(err) : "ok";
    if (n) return n;
    snprintf(buf, sizeof buf, "E%d", err);
    return buf;
}

void emit_res(const char *name, const char *result, const char *fmt, ...)
{
    char detail[3072] = "";
    char line[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    for (char *p = detail; *p; p++)
        if (*p == '\t' || *p == '\n' || *p == '\r') *p = ' ';
    int n = snprintf(line, sizeof line, "@probe\t%s\t%s\t%s\n", name, result, detail);
    if (n > (int)sizeof line - 1) {
        n = (int)sizeof line - 1;
        line[n - 1] = '\n';
    }
    ssize_t w = write(1, line, (size_t)n);
    (void)w;
}

int rc_err(long r)
{
    return r < 0 ? errno : 0;
}

void split2(const char *arg, char *a, size_t an, char *b, size_t bn)
{
    const char *c = arg ? strchr(arg, ':') : NULL;
    size_t la = c ? (size_t)(c - arg) : (arg ? strlen(arg) : 0);
    if (la >= an) la = an - 1;
    if (arg) memcpy(a, arg, la);
    a[la] = 0;
    snprintf(b, bn, "%s", c ? c + 1 : "");
}

size_t unescape(const char *in, char *out, size_t n)
{
    size_t o = 0;
    for (; *in && o + 1 < n; in++) {
        if (*in == '\\' && in[1]) {
            in++;
            out[o++] = *in == 'n' ? '\n' : *in == 'r' ? '\r' : *in == 't' ? '\t' : *in;
        } else {
            out[o++] = *in;
        }
    }
    out[o] = 0;
    return o;
}

pid_t arg_pid(const char *arg)
{
    if (!arg || !*arg || strcmp(arg, "self") == 0) return getpid();
    return (pid_t)strtol(arg, NULL, 10);
}

int need_arg(const char *name, const char *arg)
{
    if (arg && *arg) return 1;
    emit(name, EINVAL, "missing argument");
    return 0;
}
