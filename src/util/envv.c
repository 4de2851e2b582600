/* envv: a NULL-terminated "NAME=value" array (an envp for execve) edited in place. */
#include "util/envv.h"

#include <stdlib.h>
#include <string.h>

#include "util/mem.h"

char **envv_put(char **envp, const char *name, const char *value)
{
    size_t nl = strlen(name), n = 0;
    while (envp && envp[n] && !(strncmp(envp[n], name, nl) == 0 && envp[n][nl] == '='))
        n++;
    char *entry = xasprintf("%s=%s", name, value);
    if (envp && envp[n]) { /* replace the value it had */
        free(envp[n]);
        envp[n] = entry;
        return envp;
    }
    envp = xrealloc(envp, (n + 2) * sizeof *envp);
    envp[n] = entry;
    envp[n + 1] = NULL;
    return envp;
}
