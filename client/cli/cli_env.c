/* cli_env: `exec-client --environment NAME`: the connection of environment NAME of an
 * environments.toml (codex's file, ec_env_file), instead of --url or --remote.
 *
 * The file is --environments FILE, else $CODEX_HOME/environments.toml (CODEX_HOME
 * defaulting to ~/.codex), as codex reads it. The environment's transport (url,
 * remote registry + environment id, or a program spoken to over stdio), its token and
 * CA file and its connect timeout are used; --token, --ca-file and --timeout-ms given
 * on the command line still win. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cli_use_environment(struct cli *cli, bool token_given, bool ca_given)
{
    ec_error e = {0};
    if (ec_env_file_load(cli->environments_file, &cli->env_file, &e) != 0) {
        fprintf(stderr, "exec-client: %s\n", e.message);
        exit(EXIT_USAGE);
    }
    const ec_client_options *o = ec_env_file_find(cli->env_file, cli->environment);
    if (!o) {
        if (strcmp(cli->environment, "local") == 0)
            fprintf(stderr, "exec-client: `local` is codex's in-process executor; exec-client "
                            "reaches environments over a connection only\n");
        else
            fprintf(stderr, "exec-client: no environment `%s` in the environments file",
                    cli->environment);
        size_t n = ec_env_file_count(cli->env_file);
        for (size_t i = 0; i < n && strcmp(cli->environment, "local") != 0; i++)
            fprintf(stderr, "%s%s", i ? ", " : " (it has: ", ec_env_file_id(cli->env_file, i));
        if (n && strcmp(cli->environment, "local") != 0) fputc(')', stderr);
        if (strcmp(cli->environment, "local") != 0) fputc('\n', stderr);
        exit(EXIT_USAGE);
    }
    cli->env = o;
    cli->url = o->url;
    cli->remote = o->remote_url;
    cli->environment_id = o->environment_id;
    if (!token_given) cli->token = o->bearer_token;
    if (!ca_given) cli->ca_file = o->ca_file;
}

void cli_env_done(struct cli *cli)
{
    ec_env_file_free(cli->env_file);
    cli->env_file = NULL;
    cli->env = NULL;
}
