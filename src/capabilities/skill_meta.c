/* skill_meta: the SKILL.md front matter and the agents/openai.yaml sidecar, as
 * capabilities/discoverV2 reports them (rules settled against codex 0.169.0):
 *
 * SKILL.md: the first line is `---` (surrounding white space ignored) and a later
 * such line closes a non-empty block; the block is YAML. `name`, `description` and
 * `metadata.short-description` are scalars of any kind (a number or `true` is read
 * as its text; null, `~` or nothing means absent; a sequence or a map invalidates
 * the skill); unknown members are ignored. Prose such as `description: Build for
 * AWS: ECS`, invalid as YAML, is loaded after the line-oriented repair the
 * reference applies: a plain scalar holding `: `, or starting with `[`, `{`, `@` or
 * a backquote without loading by itself, is single-quoted (a trailing ` #comment`
 * kept, block scalars left alone). Values are folded to one line; the name falls
 * back to the directory's name; a blank description or a name over 64 characters
 * makes the skill invalid.
 *
 * openai.yaml: `dependencies.tools[]` entries need `type` and `value` (others are
 * dropped one by one; none left means no dependencies); `policy` has
 * `allow_implicit_invocation` (true/false in any YAML 1.2 spelling, or null) and
 * `products` (codex, chatgpt, atlas, or the same in capitals). A policy that does
 * not decode, or a file that does not load, gives neither member. The reference
 * never fills `oauthCallbackPort` from the file; neither do we. */
#include "capabilities/skill_meta.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "proto/utf8.h"
#include "util/buf.h"
#include "util/mem.h"

#define SKILL_MAX_NAME 64

/* ---- text helpers -------------------------------------------------------------------- */

static size_t seq_len(unsigned char c)
{
    return c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
}

/* Whether the code point at s (n bytes left) is white space; its length in *k. */
static bool white_at(const char *s, size_t n, size_t *k)
{
    *k = seq_len((unsigned char)*s);
    if (*k > n) *k = n;
    return utf8_all_white_space(s, *k);
}

char *caproots_single_line(const char *s, size_t n)
{
    struct buf b;
    buf_init(&b);
    bool pending = false;
    for (size_t i = 0; i < n;) {
        size_t k;
        if (white_at(s + i, n - i, &k)) {
            pending = b.len > 0;
        } else {
            if (pending) buf_putc(&b, ' ');
            pending = false;
            buf_append(&b, s + i, k);
        }
        i += k;
    }
    buf_putc(&b, '\0');
    return buf_steal(&b);
}

/* The span of s without Unicode white space at either end. */
static void trim(const char **s, size_t *n)
{
    size_t k;
    while (*n && white_at(*s, *n, &k)) {
        *s += k;
        *n -= k;
    }
    /* From the end: step back over continuation bytes to each code point's start. */
    while (*n) {
        size_t start = *n - 1;
        while (start > 0 && ((unsigned char)(*s)[start] & 0xC0) == 0x80)
            start--;
        if (!white_at(*s + start, *n - start, &k)) break;
        *n = start;
    }
}

static size_t utf8_chars(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        if (((unsigned char)*s & 0xC0) != 0x80) n++;
    return n;
}

/* ---- YAML access ----------------------------------------------------------------------- */

struct ydoc {
    yaml_document_t doc;
    bool loaded;
};

static bool ydoc_load(struct ydoc *d, const char *text, size_t len)
{
    yaml_parser_t p;
    d->loaded = false;
    if (!yaml_parser_initialize(&p)) return false;
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    bool ok = yaml_parser_load(&p, &d->doc) != 0;
    /* A second document makes it a stream, which a single value is not. */
    if (ok) {
        yaml_document_t more;
        if (yaml_parser_load(&p, &more)) {
            bool another = yaml_document_get_root_node(&more) != NULL;
            yaml_document_delete(&more);
            if (another) {
                yaml_document_delete(&d->doc);
                ok = false;
            }
        } else {
            yaml_document_delete(&d->doc);
            ok = false;
        }
    }
    yaml_parser_delete(&p);
    d->loaded = ok;
    return ok;
}

static void ydoc_free(struct ydoc *d)
{
    if (d->loaded) yaml_document_delete(&d->doc);
    d->loaded = false;
}

static yaml_node_t *ynode(struct ydoc *d, int id)
{
    return yaml_document_get_node(&d->doc, id);
}

static bool plain_is(const yaml_node_t *n, const char *const *words)
{
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    for (const char *const *w = words; *w; w++)
        if (n->data.scalar.length == strlen(*w) &&
            memcmp(n->data.scalar.value, *w, n->data.scalar.length) == 0)
            return true;
    return false;
}

static bool is_null(const yaml_node_t *n)
{
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL", NULL};
    return !n || plain_is(n, nulls);
}

/* The value of `key` in mapping m, or NULL (absent, or m is not a mapping). */
static yaml_node_t *ymember(struct ydoc *d, yaml_node_t *m, const char *key)
{
    if (!m || m->type != YAML_MAPPING_NODE) return NULL;
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = ynode(d, p->key);
        if (k && k->type == YAML_SCALAR_NODE && k->data.scalar.length == strlen(key) &&
            memcmp(k->data.scalar.value, key, k->data.scalar.length) == 0)
            return ynode(d, p->value);
    }
    return NULL;
}

/* An optional string member: 0 with *out (malloc'd, or NULL when absent or null),
 * or -1 when it is a sequence or a map. */
static int ystring(const yaml_node_t *n, char **out)
{
    *out = NULL;
    if (is_null(n)) return 0;
    if (n->type != YAML_SCALAR_NODE) return -1;
    *out = xstrndup((const char *)n->data.scalar.value, n->data.scalar.length);
    return 0;
}

/* ---- SKILL.md ---------------------------------------------------------------------------- */

/* The front matter block (malloc'd, lines joined by LF) or NULL. */
static char *front_matter(const char *s, size_t n)
{
    struct buf b;
    buf_init(&b);
    bool first = true, closed = false;
    size_t lines = 0;
    for (size_t i = 0; i < n;) {
        const char *nl = memchr(s + i, '\n', n - i);
        size_t len = nl ? (size_t)(nl - (s + i)) : n - i;
        const char *line = s + i;
        size_t ll = len;
        if (ll && line[ll - 1] == '\r') ll--;
        const char *t = line;
        size_t tl = ll;
        trim(&t, &tl);
        bool fence = tl == 3 && memcmp(t, "---", 3) == 0;
        if (first) {
            if (!fence) break;
            first = false;
        } else if (fence) {
            closed = true;
            break;
        } else {
            if (lines++) buf_putc(&b, '\n');
            buf_append(&b, line, ll);
        }
        i += len + (nl != NULL);
    }
    if (!closed || lines == 0) {
        buf_free(&b);
        return NULL;
    }
    buf_putc(&b, '\0');
    return buf_steal(&b);
}

/* Whether a lone scalar loads as YAML by itself. */
static bool loads_alone(const char *s, size_t n)
{
    struct ydoc d;
    bool ok = ydoc_load(&d, s, n);
    ydoc_free(&d);
    return ok;
}

/* The reference's repair of prose scalars; NULL when no line changed. */
static char *repair(const char *fm)
{
    struct buf b;
    buf_init(&b);
    bool changed = false, in_block = false;
    size_t block_indent = 0, nlines = 0;
    for (const char *l = fm; *l;) {
        const char *nl = strchr(l, '\n');
        size_t len = nl ? (size_t)(nl - l) : strlen(l);
        if (nlines++) buf_putc(&b, '\n');
        size_t indent = 0;
        while (indent < len && l[indent] == ' ')
            indent++;
        const char *next = l + len + (nl != NULL);
        if (in_block) {
            const char *t = l;
            size_t tl = len;
            trim(&t, &tl);
            if (tl == 0 || indent > block_indent) {
                buf_append(&b, l, len);
                l = next;
                continue;
            }
            in_block = false;
        }
        const char *colon = memchr(l, ':', len);
        const char *key = l;
        size_t keylen = colon ? (size_t)(colon - l) : 0;
        const char *kt = key;
        size_t ktl = keylen;
        trim(&kt, &ktl);
        const char *val = colon ? colon + 1 : NULL;
        size_t vlen = colon ? len - keylen - 1 : 0;
        size_t k;
        if (!colon || ktl == 0 || (vlen && !white_at(val, vlen, &k))) {
            buf_append(&b, l, len);
            l = next;
            continue;
        }
        /* leading white space, the scalar, a ` #comment` */
        const char *sc = val;
        size_t sl = vlen;
        while (sl && white_at(sc, sl, &k)) {
            sc += k;
            sl -= k;
        }
        size_t lead = (size_t)(sc - val);
        size_t comment = sl;
        for (size_t i = 0; i < sl; i++) {
            if (sc[i] == '#' && (i == 0 || sc[i - 1] == ' ' || sc[i - 1] == '\t')) {
                comment = i;
                while (comment > 0 && (sc[comment - 1] == ' ' || sc[comment - 1] == '\t'))
                    comment--;
                break;
            }
        }
        size_t scl = comment;
        while (scl && (sc[scl - 1] == ' ' || sc[scl - 1] == '\t'))
            scl--;
        if (scl == 0) {
            buf_append(&b, l, len);
            l = next;
            continue;
        }
        char c0 = sc[0];
        if (c0 == '|' || c0 == '>') {
            in_block = true;
            block_indent = indent;
            buf_append(&b, l, len);
            l = next;
            continue;
        }
        bool colon_sep = false;
        for (size_t i = 0; i + 1 < scl && !colon_sep; i++)
            colon_sep = sc[i] == ':' && white_at(sc + i + 1, scl - i - 1, &k);
        bool bad_flow = (c0 == '[' || c0 == '{' || c0 == '@' || c0 == '`') && !loads_alone(sc, scl);
        if (c0 == '\'' || c0 == '"' || (!colon_sep && !bad_flow)) {
            buf_append(&b, l, len);
            l = next;
            continue;
        }
        buf_append(&b, key, keylen);
        buf_putc(&b, ':');
        buf_append(&b, val, lead);
        buf_putc(&b, '\'');
        for (size_t i = 0; i < scl; i++) {
            if (sc[i] == '\'') buf_putc(&b, '\'');
            buf_putc(&b, sc[i]);
        }
        buf_putc(&b, '\'');
        buf_append(&b, sc + scl, sl - scl);
        changed = true;
        l = next;
    }
    if (!changed) {
        buf_free(&b);
        return NULL;
    }
    buf_putc(&b, '\0');
    return buf_steal(&b);
}

void caproots_skill_free(struct caproots_skill *s)
{
    free(s->name);
    free(s->description);
    free(s->short_description);
    memset(s, 0, sizeof *s);
}

int caproots_skill_parse(const char *contents, size_t len, const char *default_name,
                         struct caproots_skill *out)
{
    memset(out, 0, sizeof *out);
    char *fm = front_matter(contents, len);
    if (!fm) return -EINVAL;
    struct ydoc d;
    if (!ydoc_load(&d, fm, strlen(fm))) {
        char *fixed = repair(fm);
        bool ok = fixed && ydoc_load(&d, fixed, strlen(fixed));
        free(fixed);
        if (!ok) {
            free(fm);
            return -EINVAL;
        }
    }
    free(fm);
    int rc = -EINVAL;
    char *name = NULL, *desc = NULL, *shortd = NULL;
    yaml_node_t *root = yaml_document_get_root_node(&d.doc);
    if (!root || root->type != YAML_MAPPING_NODE) goto out;
    yaml_node_t *meta = ymember(&d, root, "metadata");
    if (ystring(ymember(&d, root, "name"), &name) < 0 ||
        ystring(ymember(&d, root, "description"), &desc) < 0)
        goto out;
    if (!is_null(meta)) {
        if (meta->type != YAML_MAPPING_NODE) goto out;
        if (ystring(ymember(&d, meta, "short-description"), &shortd) < 0) goto out;
    }
    out->name = name ? caproots_single_line(name, strlen(name)) : NULL;
    if (!out->name || !*out->name) {
        free(out->name);
        out->name = xstrdup(default_name);
    }
    out->description = caproots_single_line(desc ? desc : "", desc ? strlen(desc) : 0);
    if (shortd) {
        out->short_description = caproots_single_line(shortd, strlen(shortd));
        if (!*out->short_description) {
            free(out->short_description);
            out->short_description = NULL;
        }
    }
    if (!*out->name || utf8_chars(out->name) > SKILL_MAX_NAME || !*out->description) {
        caproots_skill_free(out);
        goto out;
    }
    rc = 0;
out:
    free(name);
    free(desc);
    free(shortd);
    ydoc_free(&d);
    return rc;
}

/* ---- agents/openai.yaml -------------------------------------------------------------------- */

static json_t *opt_json(const yaml_node_t *n, bool *bad)
{
    char *s;
    if (ystring(n, &s) < 0) {
        *bad = true;
        return json_null();
    }
    json_t *j = s ? json_string(s) : json_null();
    free(s);
    return j ? j : json_null();
}

static json_t *tools_json(struct ydoc *d, yaml_node_t *deps, bool *fail)
{
    if (is_null(deps)) return json_null();
    if (deps->type != YAML_MAPPING_NODE) {
        *fail = true;
        return NULL;
    }
    yaml_node_t *tools = ymember(d, deps, "tools");
    if (!is_null(tools) && tools->type != YAML_SEQUENCE_NODE) {
        *fail = true;
        return NULL;
    }
    json_t *arr = json_array();
    for (yaml_node_item_t *it = tools ? tools->data.sequence.items.start : NULL;
         it && it < tools->data.sequence.items.top; it++) {
        yaml_node_t *t = ynode(d, *it);
        if (!t || t->type != YAML_MAPPING_NODE) continue;
        yaml_node_t *type = ymember(d, t, "type"), *value = ymember(d, t, "value");
        if (is_null(type) || is_null(value) || type->type != YAML_SCALAR_NODE ||
            value->type != YAML_SCALAR_NODE)
            continue;
        bool bad = false;
        json_t *tool = json_object();
        json_object_set_new(tool, "type", opt_json(type, &bad));
        json_object_set_new(tool, "value", opt_json(value, &bad));
        json_object_set_new(tool, "description", opt_json(ymember(d, t, "description"), &bad));
        json_object_set_new(tool, "transport", opt_json(ymember(d, t, "transport"), &bad));
        json_object_set_new(tool, "command", opt_json(ymember(d, t, "command"), &bad));
        json_object_set_new(tool, "url", opt_json(ymember(d, t, "url"), &bad));
        json_object_set_new(tool, "oauthCallbackPort", json_null());
        if (bad)
            json_decref(tool);
        else
            json_array_append_new(arr, tool);
    }
    if (json_array_size(arr) == 0) {
        json_decref(arr);
        return json_null();
    }
    return json_pack("{s:o}", "tools", arr);
}

static json_t *policy_json(struct ydoc *d, yaml_node_t *pol, bool *fail)
{
    if (is_null(pol)) return json_null();
    if (pol->type != YAML_MAPPING_NODE) goto bad;
    yaml_node_t *allow = ymember(d, pol, "allow_implicit_invocation");
    static const char *const yes[] = {"true", "True", "TRUE", NULL};
    static const char *const no[] = {"false", "False", "FALSE", NULL};
    json_t *a;
    if (is_null(allow))
        a = json_null();
    else if (plain_is(allow, yes))
        a = json_true();
    else if (plain_is(allow, no))
        a = json_false();
    else
        goto bad;
    yaml_node_t *prods = ymember(d, pol, "products");
    json_t *list = json_array();
    if (!is_null(prods)) {
        if (prods->type != YAML_SEQUENCE_NODE) {
            json_decref(list);
            json_decref(a);
            goto bad;
        }
        for (yaml_node_item_t *it = prods->data.sequence.items.start;
             it < prods->data.sequence.items.top; it++) {
            yaml_node_t *p = ynode(d, *it);
            static const char *const names[] = {"codex", "chatgpt", "atlas"};
            static const char *const upper[] = {"CODEX", "CHATGPT", "ATLAS"};
            int found = -1;
            for (int k = 0; k < 3 && p && p->type == YAML_SCALAR_NODE; k++) {
                size_t l = strlen(names[k]);
                if (p->data.scalar.length == l && (memcmp(p->data.scalar.value, names[k], l) == 0 ||
                                                   memcmp(p->data.scalar.value, upper[k], l) == 0))
                    found = k;
            }
            if (found < 0) {
                json_decref(list);
                json_decref(a);
                goto bad;
            }
            json_array_append_new(list, json_string(names[found]));
        }
    }
    return json_pack("{s:o,s:o}", "allowImplicitInvocation", a, "products", list);
bad:
    *fail = true;
    return NULL;
}

void caproots_skill_sidecar(const char *contents, size_t len, json_t **dependencies,
                            json_t **policy)
{
    *dependencies = json_null();
    *policy = json_null();
    struct ydoc d;
    if (!ydoc_load(&d, contents, len)) return;
    yaml_node_t *root = yaml_document_get_root_node(&d.doc);
    if (root && root->type == YAML_MAPPING_NODE) {
        bool fail = false;
        json_t *deps = tools_json(&d, ymember(&d, root, "dependencies"), &fail);
        json_t *pol = fail ? NULL : policy_json(&d, ymember(&d, root, "policy"), &fail);
        if (!fail) {
            *dependencies = deps;
            *policy = pol;
        } else {
            json_decref(deps);
            json_decref(pol);
        }
    }
    ydoc_free(&d);
}
