/* proc_denied: PROTOCOL.md section 10.5's rules, in their order. The retained output is
 * searched as one text so a keyword split across two reads still counts. */
#include "process/proc_denied.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "util/mem.h"

static const char *const keywords[] = {
    "operation not permitted",
    "permission denied",
    "read-only file system",
    "seccomp",
    "sandbox",
    "landlock",
    "failed to write file",
    /* The sandbox's process cap (--sandbox-max-processes): fork's EAGAIN as shells and
     * runtimes print it (bash, make, python; dash says "Cannot fork"). */
    "resource temporarily unavailable",
    "cannot fork",
    NULL,
};

bool proc_denied_verdict(bool sandboxed, int exit_code, const struct event_log *log)
{
    if (!sandboxed || exit_code == 0) return false;
    size_t n = 0;
    for (const struct log_chunk *c = log->head; c; c = c->next)
        n += c->len;
    char *text = xmalloc(n + 1);
    size_t off = 0;
    for (const struct log_chunk *c = log->head; c; c = c->next) {
        for (uint32_t i = 0; i < c->len; i++)
            text[off++] = (char)tolower(c->data[i] ? c->data[i] : ' ');
    }
    text[off] = 0;
    bool hit = false;
    for (int k = 0; keywords[k] && !hit; k++)
        hit = strstr(text, keywords[k]) != NULL;
    free(text);
    if (hit) return true;
    if (exit_code == 2 || exit_code == 126 || exit_code == 127) return false;
    return exit_code == 128 + 31; /* SIGSYS from the seccomp filter */
}
