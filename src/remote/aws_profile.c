/* aws_profile: the AWS shared credentials and config files (see aws_profile.h). */
#include "remote/aws_profile.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/env_vars.h"
#include "core/host_env.h"
#include "util/mem.h"

static const char *const indirect_keys[] = {"role_arn",           "sso_session",
                                            "sso_start_url",      "sso_account_id",
                                            "credential_process", "web_identity_token_file",
                                            "credential_source",  NULL};

/* s[0..n) with blanks trimmed, as a new string. */
static char *trim_dup(const char *s, size_t n)
{
    while (n && isspace((unsigned char)*s)) {
        s++;
        n--;
    }
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    return xstrndup(s, n);
}

/* Whether header (the text between '[' and ']') names profile `name`. */
static bool section_is(const char *header, const char *name, bool is_config)
{
    char *h = trim_dup(header, strlen(header));
    const char *p = h;
    bool match;
    if (is_config && strncmp(p, "profile", 7) == 0 && isspace((unsigned char)p[7])) {
        p += 7;
        while (isspace((unsigned char)*p))
            p++;
        match = strcmp(p, name) == 0;
    } else {
        /* The config file names the default profile `[default]`, the credentials
         * file every profile by its bare name. */
        match = strcmp(p, name) == 0 && (!is_config || strcmp(name, "default") == 0);
    }
    free(h);
    return match;
}

static void set_once(char **slot, const char *value)
{
    if (!*slot && *value) *slot = xstrdup(value);
}

static void apply(struct aws_profile *out, const char *key, const char *value)
{
    if (strcasecmp(key, "aws_access_key_id") == 0)
        set_once(&out->access_key, value);
    else if (strcasecmp(key, "aws_secret_access_key") == 0)
        set_once(&out->secret_key, value);
    else if (strcasecmp(key, "aws_session_token") == 0)
        set_once(&out->session_token, value);
    else if (strcasecmp(key, "region") == 0)
        set_once(&out->region, value);
    for (const char *const *k = indirect_keys; *k && !out->indirect; k++)
        if (strcasecmp(key, *k) == 0) out->indirect = *k;
}

void aws_profile_parse(const char *text, const char *name, bool is_config, struct aws_profile *out)
{
    bool in = false;
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        char *l = trim_dup(line, n);
        bool indented = n && isspace((unsigned char)line[0]);
        if (l[0] == '[') {
            char *close = strrchr(l, ']');
            if (close) *close = '\0';
            in = close && section_is(l + 1, name, is_config);
            if (in) out->found = true;
        } else if (in && !indented && l[0] && l[0] != '#' && l[0] != ';') {
            char *eq = strchr(l, '=');
            if (eq) {
                *eq = '\0';
                char *k = trim_dup(l, strlen(l)), *v = trim_dup(eq + 1, strlen(eq + 1));
                apply(out, k, v);
                free(k);
                memset(v, 0, strlen(v));
                free(v);
            }
        }
        memset(l, 0, strlen(l));
        free(l);
        line = end ? end + 1 : NULL;
    }
}

/* A file's path: the variable's value v, else ~/.aws/<base>. */
static void file_path(const char *v, const char *base, char *out, size_t n)
{
    if (v && *v) {
        snprintf(out, n, "%s", v);
        return;
    }
    char home[4096];
    int w = snprintf(out, n, "%s/.aws/%s", host_env_home(home, sizeof home) ? home : "", base);
    if (w < 0 || (size_t)w >= n) out[0] = '\0'; /* too long: no file rather than another */
}

/* The whole file (at most 1 MiB), or NULL when it cannot be read. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f) return NULL;
    size_t cap = 1 << 20;
    char *buf = xmalloc(cap + 1);
    size_t len = fread(buf, 1, cap, f);
    fclose(f);
    buf[len] = '\0';
    return buf;
}

void aws_profile_load(const char *name, struct aws_profile *out, char *why, size_t n)
{
    char cred_path[1024], conf_path[1024];
    file_path(env_vars.aws_shared_credentials_file, "credentials", cred_path, sizeof cred_path);
    file_path(env_vars.aws_config_file, "config", conf_path, sizeof conf_path);
    snprintf(why, n, "%s or %s", cred_path, conf_path);
    const char *paths[2] = {cred_path, conf_path};
    for (int i = 0; i < 2; i++) {
        char *text = slurp(paths[i]);
        if (!text) continue;
        aws_profile_parse(text, name, i == 1, out);
        memset(text, 0, strlen(text));
        free(text);
    }
}

static void wipe(char **s)
{
    if (!*s) return;
    memset(*s, 0, strlen(*s));
    free(*s);
    *s = NULL;
}

void aws_profile_clear(struct aws_profile *p)
{
    wipe(&p->access_key);
    wipe(&p->secret_key);
    wipe(&p->session_token);
    wipe(&p->region);
    p->found = false;
    p->indirect = NULL;
}
