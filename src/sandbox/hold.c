/* hold: a sandbox's placeholders and cgroup, held until it ends (see hold.h). */
#include "sandbox/hold.h"

#include <errno.h>
#include <stdlib.h>

#include "sandbox/cgroup_caps.h"
#include "sandbox/placeholders.h"
#include "sandbox/sandbox_host.h"
#include "util/mem.h"

struct sandbox_hold {
    struct sb_placeholders *ph; /* NULL when none */
    struct cgroup_caps cg;      /* paths NULL when none */
};

/* The process cap a cgroup can be made for (0: none). */
static unsigned cgroup_max_procs(unsigned max_procs)
{
    return cgroup_caps_available(CGROUP_CAP_PIDS) ? max_procs : 0;
}

struct sandbox_hold *sandbox_hold_acquire(const struct sandbox_policy *p, unsigned max_procs,
                                          uint64_t max_memory, int *err)
{
    struct sandbox_hold *h = xcalloc(1, sizeof *h);
    *err = 0;
    h->cg.join_fd[0] = h->cg.join_fd[1] = -1;
    /* Without namespaces there is no mount to sit on a placeholder: the broker keeps
     * a missing name from being made (fs_broker.h). */
    if (sandbox_host_mode_for(p->legacy_landlock) != SANDBOX_MODE_LANDLOCK)
        h->ph = sandbox_placeholders_acquire(&p->protected_names);
    /* A process cap that cannot be made still has RLIMIT_NPROC; a memory cap has
     * nothing else, so asking for one that cannot be made fails the start. */
    max_procs = cgroup_max_procs(max_procs);
    if (max_memory && !cgroup_caps_available(CGROUP_CAP_MEMORY)) *err = -ENOTSUP;
    int rc = *err ? -1 : cgroup_caps_create(max_procs, max_memory, &h->cg);
    if (rc < 0 && max_memory && !*err) *err = rc;
    if (*err || (!h->ph && !h->cg.path[0] && !h->cg.path[1])) {
        sandbox_hold_release(h);
        return NULL;
    }
    return h;
}

bool sandbox_hold_prepare_wanted(void)
{
    return cgroup_caps_prepare_wanted();
}

void sandbox_hold_prepare(unsigned max_procs, uint64_t max_memory)
{
    if (max_memory && !cgroup_caps_available(CGROUP_CAP_MEMORY)) return;
    cgroup_caps_prepare(cgroup_max_procs(max_procs), max_memory);
}

void sandbox_hold_cgroup_fds(const struct sandbox_hold *h, int fds[2])
{
    fds[0] = fds[1] = -1;
    for (int c = 0, n = 0; h && c < CGROUP_CAP_N; c++)
        if (h->cg.join_fd[c] >= 0) fds[n++] = h->cg.join_fd[c];
}

bool sandbox_hold_release_placeholders(struct sandbox_hold *h)
{
    if (!h) return false;
    sandbox_placeholders_release(h->ph);
    h->ph = NULL;
    return h->cg.path[0] || h->cg.path[1];
}

void sandbox_hold_release(struct sandbox_hold *h)
{
    if (!h) return;
    sandbox_placeholders_release(h->ph);
    cgroup_caps_release(&h->cg);
    free(h);
}
