/* sandbox_host: what this host and the server's options allow every sandbox (see
 * sandbox_host.h). */
#include "sandbox/sandbox_host.h"

#include <errno.h>

#include "sandbox/policy.h"
#include "sandbox/seccomp.h"

bool sandbox_pid_namespace_inherit;

int sandbox_check(const struct sandbox_spec *spec)
{
    /* Landlock is defense in depth where the kernel has it: the mount view alone
     * expresses every policy (only the granted roots visible, writes only under
     * writable ones, denied paths covered). The filter cannot be done without. */
    (void)spec;
    struct seccomp_prog probe;
    return seccomp_build(SECCOMP_NET_NONE, &probe) < 0 ? -EOPNOTSUPP : 0;
}

int sandbox_policy_check(const struct sandbox_policy *p)
{
    struct sandbox_spec spec = {.enforce_fs = p->enforce_fs, .net_restricted = p->net_restricted};
    return sandbox_check(&spec);
}
