/* main: the exec-server daemon's entry point.
 *
 *   exec-server [--listen URL] [OPTIONS]
 *   exec-server --remote URL --environment-id ID [OPTIONS]
 *   exec-server forward --connect ws://HOST:PORT --remote URL --environment-id ID ...
 *   exec-server registry --database URL ...   (runs exec-server-registry, beside it)
 *   exec-server audit verify FILE...           (checks audit logs' hash chains)
 *
 * Three steps (docs/ARCHITECTURE.md, top layer): config_parse reads the command
 * line through the option table (server/options.c: every option once, with its
 * help, bounds and default; core/options.c derives the rest), config_validate
 * checks it as a whole (server/config.c) and server_run starts the loop
 * (server/server_run.c). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "audit/audit_command.h"
#include "capabilities/caproots_scan.h"
#include "core/options.h"
#include "fs/fs_sandboxed.h"
#include "helpers/spawner.h"
#include "server/config.h"
#include "server/server_run.h"

/* `exec-server registry` is a program of its own (src/registry_main.c, installed
 * beside this one): every exec-server process maps this binary, its spawner and
 * guardian too, and a daemon's idle memory grew by its code (docs/BENCHMARKS.md row
 * 6a). argv[1] ("registry") becomes the registry's argv[0]. */
static int run_registry(char **argv)
{
    char self[PATH_MAX], path[PATH_MAX + 32];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) *slash = '\0';
        snprintf(path, sizeof path, "%s/exec-server-registry", self);
        execv(path, argv + 1);
    }
    fprintf(stderr,
            "exec-server: `registry` runs exec-server-registry from this program's "
            "directory, which failed: %s\n",
            strerror(n > 0 ? errno : ENOENT));
    return 1;
}

int main(int argc, char **argv)
{
    /* Every variable the server acts on, once, in each role (core/env_vars.h). */
    options_read_env();
    /* The fs helpers scan capability roots with capabilities' scan (fs_sandboxed.h). */
    fs_set_discover(caproots_scan);
    /* The spawner is this same program, started once by the daemon (spawner.h). */
    if (argc == 2 && strcmp(argv[1], SPAWNER_ARG) == 0)
        return spawner_main(SPAWNER_SOCK_FD, fs_helper_run);
    if (argc > 1 && strcmp(argv[1], "registry") == 0) return run_registry(argv);
    if (argc > 1 && strcmp(argv[1], "audit") == 0) return audit_command_main(argc - 1, argv + 1);
    int status = config_parse(argc, argv);
    if (status == CONFIG_OK) status = config_validate();
    if (status == CONFIG_OK) status = server_run();
    config_free();
    return status;
}
