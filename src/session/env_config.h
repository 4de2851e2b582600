/* env_config: `environmentConfig/read` (see env_config.c, PROTOCOL.md §8.3). */
#ifndef EXEC_SESSION_ENV_CONFIG_H
#define EXEC_SESSION_ENV_CONFIG_H

#include <jansson.h>
#include <stddef.h>

#include "rpc/rpc.h"

/* Pure: the TOML text of `text` (len bytes) reduced to the entries under the key
 * paths in `paths` (an array of arrays of strings). Returns a malloc'd string, ""
 * when nothing matched. */
char *env_config_filter(const char *text, size_t len, json_t *paths);

extern const struct rpc_method env_config_methods[];

#endif
