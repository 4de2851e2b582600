/* ec_envs: one command in each environment of an environments.toml, the way a
 * harness holds many environments: load the file, capture one step's ready handles
 * (connecting them on first use, in the background, at most 30 s), run the command
 * through each captured handle, release the step.
 *
 *   cc ec_envs.c $(pkg-config --cflags --libs libexecclient) -o ec_envs
 *   ./ec_envs ~/.codex/environments.toml uname -n
 *
 * Prints one line per environment: `ID: OUTPUT` with the command's output on one
 * line (its exit status after it when not 0), or `ID: failed: REASON` for one that
 * could not be reached. Exits 0 when the command succeeded everywhere, 1 otherwise. */
#include <execclient.h>

#include <stdio.h>
#include <string.h>

/* Runs argv through c; its stdout (newlines turned into spaces) goes to out. */
static int run(ec_client *c, const char *const *argv, char *out, size_t n, ec_error *e)
{
    /* The command gets the executor's own environment, as a job started there would. */
    ec_start_options so = {.argv = argv, .env_inherit = "all"};
    ec_process *p;
    if (ec_process_start(c, &so, &p, e) != 0) return -1;
    size_t k = 0;
    int status = -1;
    ec_event ev;
    while (ec_process_next_event(p, 60000, &ev, e) == 0 && ev.type != EC_EVENT_CLOSED) {
        if (ev.type == EC_EVENT_EXITED) status = ev.exit_code;
        for (size_t i = 0;
             ev.type == EC_EVENT_OUTPUT && ev.stream == EC_STREAM_STDOUT && i < ev.len && k + 1 < n;
             i++)
            out[k++] = ev.data[i] == '\n' ? ' ' : (char)ev.data[i];
    }
    while (k > 0 && out[k - 1] == ' ')
        k--;
    out[k] = 0;
    ec_process_free(p);
    return status;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: ec_envs ENVIRONMENTS_TOML CMD [ARGS...]\n");
        return 2;
    }
    ec_env_file *file;
    ec_error e;
    if (ec_env_file_load(argv[1], &file, &e) != 0) {
        fprintf(stderr, "%s\n", e.message);
        return 2;
    }
    ec_envs *envs = ec_envs_new();
    ec_envs_add_file(envs, file, &e);
    ec_env_file_free(file); /* the environments keep their own copies */

    ec_step *step = ec_envs_capture(envs, NULL, 0, 30000); /* every environment */
    int bad = 0;
    for (size_t i = 0; i < ec_step_count(step); i++) {
        const char *id = ec_step_id(step, i), *why = NULL;
        ec_client *c = ec_step_client(step, id);
        if (!c) {
            ec_env_state st = ec_step_state(step, id, &why);
            printf("%s: %s%s%s\n", id, ec_env_state_name(st), why ? ": " : "", why ? why : "");
            bad = 1;
            continue;
        }
        char out[4096];
        int status = run(c, (const char *const *)argv + 2, out, sizeof out, &e);
        if (status == 0) {
            printf("%s: %s\n", id, out);
        } else if (status > 0) {
            printf("%s: %s (exit status %d)\n", id, out, status);
            bad = 1;
        } else {
            printf("%s: failed: %s\n", id, e.message);
            bad = 1;
        }
    }
    ec_step_release(step);
    ec_envs_free(envs);
    return bad;
}
