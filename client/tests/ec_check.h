/* ec_check: the tiny assertion kit the client's C tests share (they run without
 * cmocka so the client tree builds on its own): CHECK counts failures and goes on, and
 * EC_CHECK_EXIT ends main with the verdict. */
#ifndef EC_CHECK_H
#define EC_CHECK_H

#include <stdio.h>

static int failures;
#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);               \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* Returns from main: 1 after any failed check, else 0 with a line naming the test. */
#define EC_CHECK_EXIT(name)                                                                        \
    do {                                                                                           \
        if (failures) {                                                                            \
            fprintf(stderr, "%d check(s) failed\n", failures);                                     \
            return 1;                                                                              \
        }                                                                                          \
        printf("%s: all checks passed\n", name);                                                   \
        return 0;                                                                                  \
    } while (0)

#endif
