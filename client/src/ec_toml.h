/* ec_toml: a strict TOML reader for environments.toml, sans I/O. Not installed.
 *
 * Why our own: Debian bookworm packages no C TOML library (libtoml11, tomlplusplus and
 * cpptoml are C++, and a C library should not pull in libstdc++ for one small
 * configuration file), and the file codex reads needs only plain TOML: tables, arrays
 * of tables, key/value pairs with dotted keys, strings, numbers, booleans, arrays and
 * inline tables. So this is a complete reader for that part of TOML 1.0 (plus what
 * TOML 1.1, the version codex's `toml` crate speaks, adds to it: inline tables over
 * several lines with a trailing comma, and the \e and \xHH escapes), strict where the
 * specification is: every table/key redefinition rule, number syntax (underscores,
 * leading zeros, prefixes), string escapes and control characters, UTF-8 throughout.
 * What it refuses on purpose, with a clear message: date and time values, inf and nan
 * (JSON cannot carry them and no field of the file takes them), and NUL in keys.
 *
 * Text in, a JSON tree out (jansson: tables are objects in document order, arrays
 * arrays, integers integers, floats reals), so the schema checks of ec_envfile.c work
 * on plain values. Bounded: 1 MiB of text, nesting 32 deep. */
#ifndef EC_TOML_H
#define EC_TOML_H

#include <jansson.h>
#include <stddef.h>

#define EC_TOML_MAX_BYTES (1u << 20)
#define EC_TOML_MAX_DEPTH 32

/* Parses len bytes of text (need not be NUL-terminated). On success returns 0 and
 * *out is a new JSON object the caller json_decref()s. On failure returns -1, *out is
 * NULL, and err (errlen bytes) holds "line L, column C: what" (one line). */
int ec_toml_parse(const char *text, size_t len, json_t **out, char *err, size_t errlen);

#endif
