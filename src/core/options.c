/* options: the engine that derives checks, defaults, --help, man entries and the
 * flags' environment from an option table (see options.h). */
#include "core/options.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/env_vars.h"
#include "util/mem.h"

const struct opt_spec *options_find(const struct opt_table *t, const char *name)
{
    for (size_t i = 0; i < t->count; i++)
        if (strcmp(t->rows[i].name, name) == 0) return &t->rows[i];
    return NULL;
}

/* ---- values ---- */

static void store_uint(const struct opt_spec *o, unsigned long long v)
{
    if (o->size == sizeof(unsigned))
        *(unsigned *)o->target = (unsigned)v;
    else
        *(uint64_t *)o->target = v;
}

/* A count, or with bytes a size with an optional K/M/G suffix: digits only (no sign,
 * no blanks), within [min, max]. Returns 0 or -EINVAL. */
static int parse_count(const char *val, bool bytes, const struct opt_spec *o,
                       unsigned long long *out)
{
    char *end;
    errno = 0;
    if (!isdigit((unsigned char)val[0])) return -EINVAL;
    unsigned long long v = strtoull(val, &end, 10);
    if (errno) return -EINVAL;
    if (bytes && *end) {
        int shift = *end == 'K' || *end == 'k'   ? 10
                    : *end == 'M' || *end == 'm' ? 20
                    : *end == 'G' || *end == 'g' ? 30
                                                 : -1;
        if (shift < 0 || end[1] || v > (o->max >> shift)) return -EINVAL;
        v <<= shift;
        end++;
    }
    if (*end || v > o->max || v < o->min) return -EINVAL;
    *out = v;
    return 0;
}

static int parse_seconds(const char *val, const struct opt_spec *o, uint64_t *ms)
{
    char *end;
    errno = 0;
    double secs = strtod(val, &end);
    if (errno || *end || end == val || isnan(secs) || secs < (double)o->min ||
        secs > (double)o->max)
        return -EINVAL;
    *ms = (uint64_t)(secs * 1000);
    return 0;
}

static int parse_choice(const char *val, const struct opt_spec *o, int *index)
{
    for (int i = 0; o->choices[i]; i++)
        if (strcmp(val, o->choices[i]) == 0) {
            *index = i;
            return 0;
        }
    return -EINVAL;
}

static void bad_value(const struct opt_spec *o, const char *value, const char *why, char *err,
                      size_t n)
{
    if (o->style == OPT_CLAP)
        snprintf(err, n, "invalid value '%s' for '--%s <%s>'%s", value, o->name, o->meta,
                 why      ? why
                 : o->bad ? o->bad
                          : "");
    else
        snprintf(err, n, "%s --%s `%s`; expected %s", o->bad ? o->bad : "invalid", o->name, value,
                 o->expect);
}

int options_store(const struct opt_spec *o, const char *value, char *err, size_t errlen)
{
    unsigned long long v;
    uint64_t ms;
    int index, r = 0;
    const char *why = NULL;
    switch (o->kind) {
    case OPT_ACTION: break;
    case OPT_FLAG: *(bool *)o->target = true; break;
    case OPT_STRING: *(const char **)o->target = value; break;
    case OPT_LIST: {
        struct opt_list *l = o->target;
        const char **grown = realloc(l->v, (l->n + 1) * sizeof *l->v);
        if (!grown) abort();
        l->v = grown;
        l->v[l->n++] = value;
        break;
    }
    case OPT_COUNT:
    case OPT_BYTES:
        r = parse_count(value, o->kind == OPT_BYTES, o, &v);
        if (r == 0) store_uint(o, v);
        break;
    case OPT_SECONDS:
        r = parse_seconds(value, o, &ms);
        if (r == 0) *(uint64_t *)o->target = ms;
        break;
    case OPT_CHOICE:
        r = parse_choice(value, o, &index);
        if (r == 0) *(int *)o->target = index;
        break;
    case OPT_PARSE: r = o->parse(value, o->target, &why); break;
    }
    if (r < 0) bad_value(o, value, why, err, errlen);
    return r < 0 ? -EINVAL : 0;
}

void options_reset(const struct opt_table *t)
{
    for (size_t i = 0; i < t->count; i++) {
        const struct opt_spec *o = &t->rows[i];
        switch (o->kind) {
        case OPT_ACTION: continue;
        case OPT_FLAG: *(bool *)o->target = false; break;
        case OPT_STRING: *(const char **)o->target = NULL; break;
        case OPT_LIST: {
            struct opt_list *l = o->target;
            free(l->v);
            *l = (struct opt_list){0};
            break;
        }
        case OPT_CHOICE: *(int *)o->target = -1; break;
        default: /* numbers: zero unless they have a default below */
            memset(o->target, 0, o->size);
            break;
        }
        char err[256];
        /* A default that does not parse is a mistake in the table itself. */
        if (o->def && options_store(o, o->def, err, sizeof err) < 0) abort();
    }
}

/* ---- --help ---- */

/* Writes text wrapped to width, every line but the first indented by indent
 * (the first continues at column col). */
static void wrap(FILE *out, const char *text, int col, int indent, int width)
{
    const char *p = text;
    while (*p) {
        while (*p == ' ')
            p++;
        size_t w = strcspn(p, " ");
        if (col > indent && col + 1 + (int)w > width) {
            fprintf(out, "\n%*s", indent, "");
            col = indent;
        } else if (col > indent) {
            fputc(' ', out);
            col++;
        }
        fwrite(p, 1, w, out);
        col += (int)w;
        p += w;
    }
    fputc('\n', out);
}

/* The help text with its default and environment variable, into b. */
static void describe(const struct opt_spec *o, char *b, size_t n)
{
    int k = snprintf(b, n, "%s", o->help);
    if (o->def && k >= 0 && (size_t)k < n)
        k += snprintf(b + k, n - (size_t)k, " (default %s%s%s)", o->def, o->def_note ? ", " : "",
                      o->def_note ? o->def_note : "");
    if (o->env && k >= 0 && (size_t)k < n)
        snprintf(b + k, n - (size_t)k, " (also %s=%s)", o->env,
                 o->env_rule == OPT_ENV_BOOL ? "true" : "1");
}

static void help_row(FILE *out, const struct opt_spec *o)
{
    char label[96], text[2048];
    int n = snprintf(label, sizeof label, "  %s%s%s--%s%s%s", o->short_name ? "-" : "",
                     o->short_name ? (char[2]){o->short_name, 0} : "", o->short_name ? ", " : "",
                     o->name, o->meta ? " " : "", o->meta ? o->meta : "");
    describe(o, text, sizeof text);
    fputs(label, out);
    if (n <= 24) {
        fprintf(out, "%*s", 26 - n, "");
        wrap(out, text, 26, 26, 90);
    } else {
        fprintf(out, "\n%26s", "");
        wrap(out, text, 26, 26, 90);
    }
}

static void help_rows(FILE *out, const struct opt_table *t, unsigned mode, const unsigned *section)
{
    bool any = false;
    for (size_t i = 0; i < t->count; i++) {
        const struct opt_spec *o = &t->rows[i];
        if ((section && o->section != *section) || !(o->modes & mode)) continue;
        if (!any && section) {
            fprintf(out, "\n%s:\n", t->sections[*section].title);
            if (t->sections[*section].intro) fprintf(out, "  %s\n", t->sections[*section].intro);
        }
        any = true;
        help_row(out, o);
    }
}

void options_print_help(FILE *out, const struct opt_table *t, unsigned mode)
{
    if (!t->sections) help_rows(out, t, mode, NULL);
    for (unsigned s = 0; s < t->section_count; s++)
        help_rows(out, t, mode, &s);
}

/* ---- the man page's OPTIONS section ---- */

/* Writes text escaped for roff; `x` becomes bold x. */
static void roff_text(FILE *out, const char *text)
{
    bool bold = false;
    if (*text == '.' || *text == '\'') fputs("\\&", out);
    for (const char *p = text; *p; p++) {
        if (*p == '`') {
            fputs(bold ? "\\fR" : "\\fB", out);
            bold = !bold;
        } else if (*p == '\\') {
            fputs("\\e", out);
        } else if (*p == '-') {
            fputs("\\-", out);
        } else {
            fputc(*p, out);
        }
    }
    if (bold) fputs("\\fR", out);
}

static void man_row(FILE *out, const struct opt_table *t, const struct opt_spec *o)
{
    fputs(".TP\n", out);
    if (o->short_name) fprintf(out, "\\fB\\-%c\\fR, ", o->short_name);
    fputs("\\fB\\-\\-", out);
    roff_text(out, o->name);
    fputs("\\fR", out);
    if (o->meta) {
        fputs(" \\fI", out);
        roff_text(out, o->meta);
        fputs("\\fR", out);
    }
    fputc('\n', out);
    char text[2048];
    describe(o, text, sizeof text);
    roff_text(out, text);
    fputs(".\n", out);
    if (t->lone_note && o->modes == t->lone_modes) {
        roff_text(out, t->lone_note);
        fputc('\n', out);
    }
    if (o->more) {
        roff_text(out, o->more);
        fputc('\n', out);
    }
}

void options_print_man(FILE *out, const struct opt_table *t)
{
    for (unsigned s = 0; s < (t->sections ? t->section_count : 1); s++) {
        if (t->sections) {
            fputs(".SS ", out);
            roff_text(out, t->sections[s].title);
            fputc('\n', out);
            if (t->sections[s].intro) {
                roff_text(out, t->sections[s].intro);
                fputc('\n', out);
            }
        }
        for (size_t i = 0; i < t->count; i++)
            if (!t->sections || t->rows[i].section == s) man_row(out, t, &t->rows[i]);
    }
}

/* ---- environment variables ---- */

void options_read_env(void)
{
    for (size_t i = 0; i < env_vars_count; i++) {
        const char *v = getenv(env_vars_table[i].name);
        free((char *)*env_vars_table[i].target); /* a second reading replaces the first */
        /* A copy: setenv (process_path.c moves PATH) may replace the string. */
        *env_vars_table[i].target = v ? xstrdup(v) : NULL;
    }
}

int options_apply_env(const struct opt_table *t, const unsigned *given)
{
    for (size_t i = 0; i < t->count; i++) {
        const struct opt_spec *o = &t->rows[i];
        const char *v = o->env ? getenv(o->env) : NULL;
        if (!v || given[i] || o->kind != OPT_FLAG) continue;
        if (o->env_rule == OPT_ENV_TRUTHY) {
            if (*v && strcmp(v, "0") != 0 && strcmp(v, "false") != 0) *(bool *)o->target = true;
        } else if (o->env_rule == OPT_ENV_BOOL) {
            if (strcmp(v, "true") != 0 && strcmp(v, "false") != 0) {
                fprintf(stderr,
                        "exec-server: invalid value '%s' for '--%s'\n  (from %s: "
                        "expected true or false)\n",
                        v, o->name, o->env);
                return -EINVAL;
            }
            *(bool *)o->target = strcmp(v, "true") == 0;
        }
    }
    return 0;
}
