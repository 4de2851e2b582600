/* log: leveled diagnostics on stderr. stdout is reserved for the bound URL (and,
 * in stdio mode, for protocol messages), so nothing here ever writes to it. */
#ifndef EXEC_CORE_LOG_H
#define EXEC_CORE_LOG_H

#include <stddef.h>

enum log_level { LOG_ERROR = 0, LOG_WARN, LOG_INFO, LOG_DEBUG };

extern enum log_level log_threshold;

/* Parses "error", "warn", "info", "debug"; returns 0 or -EINVAL for an unknown name. */
int log_level_parse(const char *name, enum log_level *out);
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...)                                                                             \
    do {                                                                                           \
        if (log_threshold >= LOG_DEBUG) log_msg(LOG_DEBUG, __VA_ARGS__);                           \
    } while (0)

/* Structured events (info): one line "event=NAME k=v k=v ...". Values that come
 * from clients go through log_value() so a line stays one line and parseable. */
#define log_event(...)                                                                             \
    do {                                                                                           \
        if (log_threshold >= LOG_INFO) log_msg(LOG_INFO, __VA_ARGS__);                            \
    } while (0)
/* s as a log value: bare when it is [A-Za-z0-9._:/@+-]+, else double-quoted with \" \\
 * and \xNN escapes; cut at n-1 bytes. Returns out. */
const char *log_value(const char *s, char *out, size_t n);

#endif
