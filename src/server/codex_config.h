/* codex_config: the Codex configuration flags of `codex exec-server` 0.171.0:
 * -c/--config KEY=VALUE, --enable FEATURE, --disable FEATURE and --strict-config.
 *
 * The reference loads ~/.codex/config.toml with these overrides, but its executor
 * uses the result only for OTEL export, its outbound HTTP proxy policy and
 * `codex login` auth in remote mode, none of which this exec-server has; so no key
 * changes what ours does (docs/FLAGS.md). The flags are still checked the way
 * 0.171.0 checks them, with its texts, so launch scripts behave the same:
 *   - a feature name --enable/--disable do not know is an error (exit 1), always;
 *   - with --strict-config, a -c without '=', a top-level key (or features.NAME) that
 *     0.171.0 does not know, a non-boolean features.NAME and the legacy `profile`
 *     key are errors (exit 1);
 *   - otherwise each -c is accepted with a warning that it is ignored.
 * Known limit: below a known top-level key (model_providers.x.y, otel.z) nothing is
 * checked, and values are not type-checked except features.NAME; the reference checks
 * both against its whole schema under --strict-config. The key and feature lists
 * were taken from 0.169.0 itself (`codex features list`, and a probe of every
 * top-level key of its config schema with -c KEY={} --strict-config), then
 * compared with 0.171.0's (nine features and three top-level keys more; a permission
 * profile's network.transparent_tcp lies below `permissions`). */
#ifndef EXEC_SERVER_CODEX_CONFIG_H
#define EXEC_SERVER_CODEX_CONFIG_H

#include <stdbool.h>

#include "server/options.h"

/* Whether 0.171.0 knows the feature name (or legacy alias). */
bool codex_config_feature_known(const char *name);

/* Checks --enable/--disable names and the -c overrides as described above, printing
 * errors ("exec-server: ...") and warnings. Returns 0, or the exit status (1). */
int codex_config_check(const struct opt_list *overrides, const struct opt_list *enable,
                       const struct opt_list *disable, bool strict);

#endif
