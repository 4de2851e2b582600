/* log: leveled diagnostics on stderr. stdout is reserved for the bound URL (and,
 * in stdio mode, for protocol messages), so nothing here ever writes to it.
 *
 * Levels, most to least severe: error, warn, notice, info, debug; the default
 * threshold is notice (what an operator wants to see once: the server is up,
 * remote mode registered). A line is "TIMESTAMP LEVEL exec-server: TEXT"; under
 * systemd (stderr is the journal's stream, $JOURNAL_STREAM) it is "<N>TEXT" instead,
 * N the syslog priority (3 error ... 7 debug), so `journalctl -p warning` filters
 * by level and the journal's own timestamp is the only one. A message is always
 * one line: log_msg escapes every control character in it (\n, \t, \r, \xNN). */
#ifndef EXEC_CORE_LOG_H
#define EXEC_CORE_LOG_H

#include <stdbool.h>
#include <stddef.h>

enum log_level { LOG_ERROR = 0, LOG_WARN, LOG_NOTICE, LOG_INFO, LOG_DEBUG };

extern enum log_level log_threshold;

/* Parses "error", "warn", "notice", "info", "debug"; returns 0 or -EINVAL. */
int log_level_parse(const char *name, enum log_level *out);
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Whether stderr is the systemd journal's stream (then lines carry <N> prefixes
 * and no timestamp). Decided once, on the first line. */
bool log_to_journal(void);

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_notice(...) log_msg(LOG_NOTICE, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...)                                                                             \
    do {                                                                                           \
        if (log_threshold >= LOG_DEBUG) log_msg(LOG_DEBUG, __VA_ARGS__);                           \
    } while (0)

/* Structured events (info): one line "event=NAME k=v k=v ...". Values that come
 * from clients go through log_value() so a line stays one line and parseable. */
#define log_event(...)                                                                             \
    do {                                                                                           \
        if (log_threshold >= LOG_INFO) log_msg(LOG_INFO, __VA_ARGS__);                             \
    } while (0)
/* s as a log value: bare when it is [A-Za-z0-9._:/@+-]+, else double-quoted with \" \\
 * \n \t \r and \xNN escapes; cut at n-1 bytes. Returns out. */
const char *log_value(const char *s, char *out, size_t n);

#endif
