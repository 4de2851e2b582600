/* hold: a sandbox's placeholders and cgroup, held until it ends (see hold.h). */
#include "sandbox/hold.h"

#include <stdlib.h>

#include "sandbox/pids_cgroup.h"
#include "sandbox/placeholders.h"
#include "util/mem.h"

struct sandbox_hold {
    struct sb_placeholders *ph; /* NULL when none */
    struct pids_cgroup cg;      /* path NULL when none */
};

struct sandbox_hold *sandbox_hold_acquire(const struct sandbox_policy *p, bool cap, unsigned max)
{
    struct sandbox_hold *h = xcalloc(1, sizeof *h);
    h->cg.procs_fd = -1;
    h->ph = sandbox_placeholders_acquire(&p->protected_names);
    if (cap && max && pids_cgroup_available()) (void)pids_cgroup_create(max, &h->cg);
    if (!h->ph && !h->cg.path) {
        free(h);
        return NULL;
    }
    return h;
}

int sandbox_hold_cgroup_fd(const struct sandbox_hold *h)
{
    return h ? h->cg.procs_fd : -1;
}

void sandbox_hold_release(struct sandbox_hold *h)
{
    if (!h) return;
    sandbox_placeholders_release(h->ph);
    pids_cgroup_remove(&h->cg);
    free(h);
}
