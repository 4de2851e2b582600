/* aws_profile: static AWS credentials and region from the shared files, for
 * `--remote-transport direct --aws-sigv4 [--aws-profile NAME]`.
 *
 * The files the AWS SDKs read: the credentials file (AWS_SHARED_CREDENTIALS_FILE,
 * default ~/.aws/credentials; sections `[NAME]`) and the config file
 * (AWS_CONFIG_FILE, default ~/.aws/config; sections `[profile NAME]`, and
 * `[default]`). A profile's aws_access_key_id, aws_secret_access_key and
 * aws_session_token come from the credentials file, else from the config file;
 * its region from the config file. Lines starting with '#' or ';' are comments,
 * indented lines (nested settings) are skipped, names and values are trimmed.
 * Only static keys are read: a profile that gets its credentials elsewhere
 * (role_arn, sso_*, credential_process, web_identity_token_file) is reported as
 * such, since this exec-server has no STS, SSO or process provider. */
#ifndef EXEC_REMOTE_AWS_PROFILE_H
#define EXEC_REMOTE_AWS_PROFILE_H

#include <stdbool.h>
#include <stddef.h>

struct aws_profile {
    char *access_key, *secret_key, *session_token, *region; /* malloc'd or NULL */
    bool found;           /* a section of that name is in one of the files */
    const char *indirect; /* the first non-static credential setting seen, or NULL */
};

/* Pure: applies the section of `name` in one file's text to out (values already in
 * out win, so read the credentials file first). is_config: the config file's
 * section naming (`[profile NAME]`, `[default]`). */
void aws_profile_parse(const char *text, const char *name, bool is_config, struct aws_profile *out);

/* Reads profile `name` from both files (missing files are skipped). Fills why with
 * the two paths, for messages. */
void aws_profile_load(const char *name, struct aws_profile *out, char *why, size_t n);

/* Wipes (the keys are secrets) and frees. */
void aws_profile_clear(struct aws_profile *p);

#endif
