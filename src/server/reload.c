/* reload: SIGHUP re-reads the TLS pair, the token file and the JWT secret (see
 * reload.h). Each piece keeps its old value when the new one fails to load. */
#include "server/reload.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "audit/audit.h"
#include "core/log.h"
#include "transport/auth.h"
#include "transport/tls.h"

static uv_signal_t sighup;
static bool started;

int reload_now(void)
{
    char err[800];
    int first = 0;
    char done[128] = "";
    if (tls_server_enabled()) {
        int r = tls_server_reload(err, sizeof err);
        if (r < 0) {
            log_warn("reload: keeping the current TLS certificate and key: %s", err);
            first = r;
        } else {
            snprintf(done + strlen(done), sizeof done - strlen(done), ",tls");
        }
    }
    if (auth_enabled()) {
        err[0] = '\0';
        int r = auth_reload(err, sizeof err);
        if (r < 0) {
            log_warn("reload: keeping the current authentication key: %s", err);
            if (!first) first = r;
        } else if (err[0] == '\0') {
            snprintf(done + strlen(done), sizeof done - strlen(done), ",auth");
        }
    }
    if (audit_enabled()) {
        audit_reopen(); /* the writer reopens it and says how that went */
        snprintf(done + strlen(done), sizeof done - strlen(done), ",audit");
    }
    log_notice("event=reload result=%s reloaded=%s", first ? "partial" : "ok",
               done[0] ? done + 1 : "nothing");
    return first;
}

static void on_sighup(uv_signal_t *s, int signum)
{
    reload_now();
}

int reload_start(uv_loop_t *loop)
{
    int r = uv_signal_init(loop, &sighup);
    if (r == 0) r = uv_signal_start(&sighup, on_sighup, SIGHUP);
    started = r == 0;
    return r;
}

void reload_stop(void)
{
    if (!started) return;
    started = false;
    uv_signal_stop(&sighup);
    if (!uv_is_closing((uv_handle_t *)&sighup)) uv_close((uv_handle_t *)&sighup, NULL);
}
