/* ec_run: the smallest useful libexecclient program. Runs one command on the server
 * and prints its output, blocking style.
 *
 *   cc ec_run.c $(pkg-config --cflags --libs libexecclient) -o ec_run
 *   ./ec_run ws://127.0.0.1:PORT uname -a */
#include <execclient.h>

#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: ec_run URL CMD [ARGS...]\n");
        return 2;
    }
    ec_client_options o = {.url = argv[1], .reconnect_timeout_ms = 10000};
    ec_client *c;
    ec_error e;
    if (ec_client_connect(&o, &c, &e) != 0) {
        fprintf(stderr, "connect: %s\n", e.message);
        return 255;
    }
    const char *env[] = {"PATH=/usr/bin:/bin", NULL};
    ec_start_options so = {.argv = (const char *const *)argv + 2, .cwd = "/", .env = env};
    ec_process *p;
    if (ec_process_start(c, &so, &p, &e) != 0) {
        fprintf(stderr, "start: %s\n", e.message);
        ec_client_close(c);
        return 127;
    }
    int status = 255;
    ec_event ev;
    /* Output, exit and close arrive pushed; no polling of process/read. */
    while (ec_process_next_event(p, -1, &ev, &e) == 0) {
        if (ev.type == EC_EVENT_OUTPUT)
            fwrite(ev.data, 1, ev.len, ev.stream == EC_STREAM_STDERR ? stderr : stdout);
        else if (ev.type == EC_EVENT_EXITED)
            status = ev.exit_code;
        else if (ev.type == EC_EVENT_CLOSED)
            break;
    }
    ec_process_free(p);
    ec_client_close(c);
    return status;
}
