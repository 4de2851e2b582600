/* codex_config: -c, --enable, --disable and --strict-config checked as 0.171.0 checks
 * them (see codex_config.h). */
#include "server/codex_config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

/* 0.171.0's feature names and legacy aliases (`codex features list`, plus the
 * aliases it still accepts; 0.171.0 added nine to 0.169.0's), sorted for bsearch. */
/* Packed as written, one row per entry: */
/* clang-format off */
static const char *const codex_features[] = {
    "agent_message_board", "agent_message_board_mcp", "analytics_plan_history",
    "api_key_cyber_access_programs", "api_key_model_discovery", "app_server_websocket_compression",
    "apply_patch_freeform", "apply_patch_preserve_line_endings", "apply_patch_streaming_events",
    "apps", "apps_early_resource_discovery", "apps_mcp_path_override", "artifact",
    "async_compaction", "async_compaction_root_only", "auth_elicitation",
    "background_paginated_rollout_migration", "bedrock_setup_wizard", "browser_annotation_api",
    "browser_use", "browser_use_external", "browser_use_full_cdp_access",
    "catalog_apps_instructions", "chronicle", "cli_daybreak", "cli_resume_account_check",
    "code_mode", "code_mode_buffered_exec", "code_mode_host", "code_mode_host_grpc",
    "code_mode_host_output_truncation", "code_mode_interrupt", "code_mode_only",
    "code_mode_only_strict_3p_tools", "code_mode_prewarm", "code_mode_tool_description_first",
    "code_mode_tool_search", "codex_apps_mcp_2026_07_28", "codex_git_commit", "codex_hooks",
    "collab", "collaboration_modes", "command_sessions_world_state", "compaction_image_budget",
    "computer_use", "concurrent_reasoning_summaries", "connectors", "content_item_kinds",
    "context_management", "credential_masking", "critical_path_timing", "current_time_reminder",
    "cwd_relative_turn_diffs", "daemon_auto_start", "daybreak_program_propagation",
    "default_mode_request_user_input", "defer_mailbox_preemption", "deferred_executor",
    "deferred_tool_world_state", "elevated_windows_sandbox", "enable_experimental_windows_sandbox",
    "enable_fanout", "enable_mcp_apps", "enable_request_compression", "exec_permission_approvals",
    "executed_tool_call_metadata", "executor_capability_discovery",
    "executor_capability_discovery_v2", "experimental_use_unified_exec_tool",
    "experimental_windows_sandbox", "external_agent_memory_import", "external_migration",
    "fast_mode", "file_backed_tool_audio", "gateway_setup_wizard", "gcp_setup_wizard", "goals",
    "guardian_approval", "guardian_conversation_history_tools", "guardian_denial_reconsideration",
    "guardian_enhanced_node_repl_transcripts", "guardian_ext",
    "guardian_include_additional_context", "guardian_native_multi_agent_history",
    "guardian_nested_approval_context", "guardian_node_repl_transcript_images",
    "guardian_recorded_items", "guardian_reuse_parent_compaction", "guardian_root_handoff_context",
    "guardian_trust_orchestrator_connectors", "guardianv2", "guardianv2.thread_context",
    "guardianv2_decisions_comparison", "guardianv3", "hooks", "hosted_search_policy",
    "image_detail_original", "image_generation", "image_generation_animation",
    "image_resize_notice", "imagegenext", "in_app_browser", "in_app_chat", "in_app_dictation",
    "in_app_local_automation", "in_app_updates", "in_app_voice", "incremental_exec_tools",
    "incremental_tools", "incremental_tools_legacy", "incremental_tools_legacy_gcp",
    "instant_interrupt", "interrupt_on_cancel", "item_ids", "js_repl", "js_repl_tools_only",
    "local_thread_store_compression", "local_thread_store_shared_compression",
    "login_shell_package_path", "mcp_2026_07_28", "mcp_connection_sharing",
    "mcp_lazy_stdio_startup", "mcp_oauth_refresh_coordination", "mcp_shared_repl_cwd",
    "mcp_tool_list_changed", "memories", "memory_tool", "mentions_v2", "model_catalog_in_context",
    "multi_agent", "multi_agent_mode", "multi_agent_v2", "multi_agent_v2_dynamic_tools",
    "multi_env_copy_file", "multi_environment_mcp", "network_proxy", "non_prefixed_mcp_tool_names",
    "nonfatal_clock_read_errors", "omit_app_server_notification_media", "omit_skill_descriptions",
    "output_token_replay", "per_environment_context", "personality", "plugin_discovery_prefetch",
    "plugin_hooks", "plugin_sharing", "plugins", "powershell_shell_version",
    "prediction_preserve_parent_tools", "prefer_mxc", "prevent_idle_sleep", "psp",
    "realtime_conversation", "reasoning_effort_override", "recommended_plugins",
    "remote_compaction_v2", "remote_control", "remote_models", "remote_plugin",
    "request_permissions", "request_permissions_tool", "request_rule", "resize_all_images",
    "respect_system_proxy", "responses_websockets", "responses_websockets_v2",
    "restored_history_prewarm", "retain_client_developer_messages", "retain_client_tool_outputs",
    "rollout_budget", "runtime_agent_instances", "runtime_metrics", "safe_image_decoder",
    "search_tool", "secret_auth_storage", "send_async_message", "send_message_to_user_async",
    "shell_snapshot", "shell_snapshot_v2", "shell_tool", "shell_zsh_fork",
    "simplified_selection_hints", "skill_catalog_deltas", "skill_env_var_dependency_prompt",
    "skill_mcp_dependency_install", "skill_search", "skip_host_skill_discovery", "sleep_tool",
    "sqlite", "stable_environment_tools", "standalone_web_search", "steer", "step_model_switching",
    "subagent_default_context_limits", "subagent_thread_environments",
    "suppress_model_change_announcements", "system_proxy_fallback", "telepathy",
    "terminal_resize_reflow", "terminal_visualization_instructions", "token_budget",
    "tool_call_mcp_elicitation", "tool_search", "tool_search_always_defer_mcp_tools",
    "tool_suggest", "transcript_v2", "tui_app_server", "tui_extensions_statusline",
    "tui_multi_backend", "tui_workspace", "ultrafast_mode", "unavailable_dummy_tools",
    "unbounded_connection_retries", "undo", "unified_exec", "unified_exec_tty",
    "unified_exec_zsh_fork", "unified_image_budget", "untrusted_as_tool_output",
    "use_agent_identity", "use_legacy_landlock", "use_linux_sandbox_bwrap", "use_xaa",
    "utc_environment_date", "view_image", "wake_on_agent_messages", "web_search",
    "web_search_cached", "web_search_request", "windows_sandbox_service", "workspace_dependencies",
    "workspace_owner_usage_nudge", "worktrees", "write_stdin_approval",
};
/* clang-format on */

/* The top-level keys of 0.171.0's configuration (0.169.0's and code_mode, responses,
 * rollout_trace), sorted. */
/* Packed as written, one row per entry: */
/* clang-format off */
static const char *const codex_top_keys[] = {
    "agents", "allow_login_shell", "analytics", "approval_policy", "approvals_reviewer", "apps",
    "apps_mcp_product_sku", "audio", "auto_review", "background_terminal_max_timeout",
    "browser_use", "chatgpt_base_url", "check_for_update_on_startup", "cli_auth_credentials_store",
    "code_mode", "compact_prompt", "computer_use", "default_permissions", "desktop",
    "developer_instructions", "disable_paste_burst", "experimental_compact_prompt_file",
    "experimental_realtime_start_instructions", "experimental_realtime_ws_backend_prompt",
    "experimental_realtime_ws_base_url", "experimental_realtime_ws_model",
    "experimental_realtime_ws_startup_context", "experimental_thread_store",
    "experimental_use_unified_exec_tool", "features", "feedback", "file_opener",
    "forced_chatgpt_workspace_id", "forced_login_method", "ghost_snapshot", "hide_agent_reasoning",
    "history", "hooks", "include_apps_instructions", "include_collaboration_mode_instructions",
    "include_environment_context", "include_permissions_instructions", "instructions", "log_dir",
    "marketplaces", "mcp_oauth_callback_port", "mcp_oauth_callback_url",
    "mcp_oauth_credentials_store", "mcp_servers", "memories", "model",
    "model_auto_compact_token_limit", "model_auto_compact_token_limit_scope", "model_catalog_json",
    "model_context_window", "model_instructions_file", "model_provider", "model_providers",
    "model_reasoning_effort", "model_reasoning_summary", "model_verbosity", "notice", "notify",
    "openai_base_url", "oss_provider", "otel", "permissions", "personality",
    "plan_mode_reasoning_effort", "plugins", "profile", "profiles",
    "project_doc_fallback_filenames", "project_doc_max_bytes", "project_root_markers", "projects",
    "realtime", "responses", "review_model", "rollout_trace", "sandbox_mode",
    "sandbox_workspace_write", "service_tier", "shell_environment_policy",
    "show_raw_agent_reasoning", "skills", "sqlite_home", "suppress_unstable_features_warning",
    "tool_output_token_limit", "tool_suggest", "tools", "tui", "web_search", "windows",
};
/* clang-format on */

/* Features whose value is a table rather than a boolean. */
static const char *const table_features[] = {"apps_mcp_path_override", "multi_agent_v2",
                                             "network_proxy", NULL};

static int cmp_name(const void *key, const void *elem)
{
    return strcmp(key, *(const char *const *)elem);
}

static bool in_sorted(const char *name, const char *const *list, size_t n)
{
    return bsearch(name, list, n, sizeof *list, cmp_name) != NULL;
}

bool codex_config_feature_known(const char *name)
{
    return in_sorted(name, codex_features, sizeof codex_features / sizeof *codex_features);
}

static bool top_key_known(const char *key, size_t n)
{
    char k[128];
    if (n >= sizeof k) return false;
    memcpy(k, key, n);
    k[n] = '\0';
    return in_sorted(k, codex_top_keys, sizeof codex_top_keys / sizeof *codex_top_keys);
}

/* The serde wording for a TOML value that is not a boolean, or NULL when it is one.
 * A value that is not valid TOML is taken as a literal string, as codex does. */
static const char *not_boolean(const char *v, char *out, size_t n)
{
    size_t len = strlen(v);
    const char *digits = v + (*v == '-' || *v == '+');
    if (strcmp(v, "true") == 0 || strcmp(v, "false") == 0) return NULL;
    if (*digits && strspn(digits, "0123456789_") == strlen(digits))
        snprintf(out, n, "invalid type: integer `%s`, expected a boolean", v);
    else if (len && strspn(v, "0123456789+-_.eE") == len && strchr(v, '.'))
        snprintf(out, n, "invalid type: floating point `%s`, expected a boolean", v);
    else if (*v == '[')
        snprintf(out, n, "invalid type: sequence, expected a boolean");
    else if (*v == '{')
        snprintf(out, n, "invalid type: map, expected a boolean");
    else if (len >= 2 && (*v == '"' || *v == '\'') && v[len - 1] == *v)
        snprintf(out, n, "invalid type: string \"%.*s\", expected a boolean", (int)len - 2, v + 1);
    else
        snprintf(out, n, "invalid type: string \"%s\", expected a boolean", v);
    return out;
}

/* One strict-mode error for override kv (KEY=VALUE), or NULL when 0.171.0 accepts
 * it. msg is the buffer for the text. */
static const char *strict_error(const char *kv, char *msg, size_t n)
{
    const char *eq = strchr(kv, '=');
    if (!eq) {
        snprintf(msg, n, "Invalid override (missing '='): %s", kv);
        return msg;
    }
    /* The key, trimmed as codex trims it. */
    const char *k = kv, *ke = eq;
    while (k < ke && isspace((unsigned char)*k))
        k++;
    while (ke > k && isspace((unsigned char)ke[-1]))
        ke--;
    const char *v = eq + 1;
    while (isspace((unsigned char)*v))
        v++;
    size_t top = strcspn(k, ".");
    if (top > (size_t)(ke - k)) top = (size_t)(ke - k);
    if (!top_key_known(k, top)) {
        snprintf(msg, n, "unknown configuration field `%.*s` in -c/--config override", (int)top, k);
        return msg;
    }
    if ((size_t)(ke - k) == 7 && strncmp(k, "profile", 7) == 0) {
        size_t vl = strlen(v);
        bool quoted = vl >= 2 && (*v == '"' || *v == '\'') && v[vl - 1] == *v;
        int w = quoted ? (int)vl - 2 : (int)vl;
        const char *p = quoted ? v + 1 : v;
        snprintf(msg, n,
                 "legacy `profile = \"%.*s\"` config is no longer supported; use "
                 "`--profile %.*s` with `%.*s.config.toml` instead",
                 w, p, w, p, w, p);
        return msg;
    }
    if (top == 8 && strncmp(k, "features", 8) == 0 && k + top < ke) {
        char name[128];
        int nl = (int)(ke - (k + top + 1));
        snprintf(name, sizeof name, "%.*s", nl, k + top + 1);
        if (!codex_config_feature_known(name)) {
            snprintf(msg, n,
                     "unknown configuration field `features.%s` in -c/--config "
                     "override",
                     name);
            return msg;
        }
        for (const char *const *t = table_features; *t; t++)
            if (strcmp(*t, name) == 0) return NULL;
        return not_boolean(v, msg, n);
    }
    return NULL;
}

static int check_features(const struct opt_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        if (!codex_config_feature_known(l->v[i])) {
            fprintf(stderr, "exec-server: Unknown feature flag: %s\n", l->v[i]);
            return 1;
        }
    return 0;
}

int codex_config_check(const struct opt_list *overrides, const struct opt_list *enable,
                       const struct opt_list *disable, bool strict)
{
    if (check_features(enable) || check_features(disable)) return 1;
    char msg[512];
    for (size_t i = 0; i < overrides->n; i++) {
        const char *kv = overrides->v[i];
        const char *err = strict_error(kv, msg, sizeof msg);
        if (err && strict) {
            fprintf(stderr, "exec-server: %s\n", err);
            return 1;
        }
        if (err)
            log_warn("-c %s: ignored (%s; an error with --strict-config)", kv, err);
        else
            log_warn("-c %s: ignored: this exec-server reads no codex configuration "
                     "(docs/FLAGS.md)",
                     kv);
    }
    for (size_t i = 0; i < enable->n + disable->n; i++)
        log_info("--%s %s: accepted; no feature changes what this exec-server does",
                 i < enable->n ? "enable" : "disable",
                 i < enable->n ? enable->v[i] : disable->v[i - enable->n]);
    return 0;
}
