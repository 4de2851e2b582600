/* skill_meta: what capabilities/discoverV2 reads out of a skill's files: the
 * SKILL.md front matter (name, description, metadata.short-description) and the
 * agents/openai.yaml sidecar (dependencies, policy). Pure functions over the file
 * texts, YAML through libyaml, with the reference's (0.169.0) rules and leniencies;
 * see skill_meta.c. */
#ifndef EXEC_CAPABILITIES_SKILL_META_H
#define EXEC_CAPABILITIES_SKILL_META_H

#include <jansson.h>
#include <stddef.h>

struct caproots_skill {
    char *name; /* sanitized: whitespace runs become one space */
    char *description;
    char *short_description; /* or NULL */
};

/* Parses SKILL.md contents. default_name is used when the front matter has no
 * (non-blank) name: the skill directory's name. Returns 0 and fills *out (free with
 * caproots_skill_free), or -EINVAL when the skill is invalid: no front matter,
 * YAML that even the scalar repair cannot load, a blank description, a name over
 * 64 characters. */
int caproots_skill_parse(const char *contents, size_t len, const char *default_name,
                         struct caproots_skill *out);
void caproots_skill_free(struct caproots_skill *s);

/* Parses agents/openai.yaml contents into the wire members `dependencies` and
 * `policy` (new references, JSON null when absent or when the file does not load). */
void caproots_skill_sidecar(const char *contents, size_t len, json_t **dependencies,
                            json_t **policy);

/* Collapses Unicode white space runs into single spaces and trims (Rust's
 * split_whitespace().join(" ")); malloc'd. */
char *caproots_single_line(const char *s, size_t n);

#endif
