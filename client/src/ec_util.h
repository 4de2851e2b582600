/* ec_util: errors and the clock, shared by every module of the client library
 * (see ec_util.c). */
#ifndef EC_UTIL_H
#define EC_UTIL_H

#include <stdint.h>

#include "execclient.h"

/* Fills *err (when given) and returns -kind. */
int ec_fail(ec_error *err, ec_err_kind kind, int64_t code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* CLOCK_MONOTONIC in ms. */
int64_t ec_now_ms(void);
/* The deadline timeout_ms from now; -1 (none) for a negative timeout. */
int64_t ec_deadline(int timeout_ms);
/* Remaining ms until deadline (-1: none), clamped at 0. */
int ec_remaining(int64_t deadline);
/* NULL-terminated string vectors (argv, "K=V" lists): a deep copy (NULL for NULL) and
 * its release. */
char **ec_strv_dup(const char *const *v);
void ec_strv_free(char **v);

#endif
