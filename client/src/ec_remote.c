/* ec_remote: the relay message layer of libexecclient (remote mode).
 *
 * For every physical connection (the first and each reconnect): ask the registry for
 * a connect bundle (ec_registry.c), open a WebSocket to the rendezvous URL it names
 * (the shared socket/TLS/upgrade code of ec_client.c), and run one harness relay
 * stream on it (ec_relay.c): resume + Noise msg 1 out, msg 2 in, then each JSON-RPC
 * message as encrypted records in data frames. A 401 on the upgrade means the signed
 * URL went stale: fetch one fresh bundle and try again (REMOTE.md §4.5). Everything
 * above the message layer (initialize, resume of the session, calls, process events)
 * is ec_client.c's unchanged code.
 *
 * The harness's Noise static key is generated once per client and kept across
 * reconnects, so the registry sees one harness identity for the whole session. */
#include "ec_registry.h"
#include "ec_relay.h"

#include "proto/noise_key.h"
#include "util/mem.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct ec_remote {
    char *base_url, *environment_id, *token; /* owned */
    struct noise_ik_static_key key;          /* ours, for the client's life */
    json_t *key_json;                        /* its public half as registry JSON */
    struct ec_relay relay;                   /* the current connection's stream */
    bool busy;         /* inside an ec_relay call: a drop must not free it under it */
    bool free_pending; /* the drop happened while busy */
    char last_error[160];
    bool rejected; /* the last stream's msg 2 said the executor's credentials were refused */
    /* The stream of the connection that dropped, to reset on the next one: the
     * executor cannot see a harness socket die behind the rendezvous, and would keep
     * the session attached to that stream (resume answered -32010 for ever). */
    char abandoned[37];
};

#define EC_RESET_REASON "harness_disconnected"

static struct ec_remote *rm_of(ec_client *c)
{
    return c->ml_state;
}

static void relay_release(struct ec_remote *rm)
{
    if (rm->relay.error[0]) memcpy(rm->last_error, rm->relay.error, sizeof rm->last_error);
    if (rm->relay.credentials_rejected) rm->rejected = true;
    /* Only a stream the executor accepted is worth a reset; one it reset itself is
     * already gone there. */
    if (rm->relay.state == EC_RELAY_OPEN)
        memcpy(rm->abandoned, rm->relay.stream_id, sizeof rm->abandoned);
    ec_relay_free(&rm->relay);
    rm->relay.error[0] = 0;
}

static void enter(struct ec_remote *rm)
{
    rm->busy = true;
}

static void leave(struct ec_remote *rm)
{
    rm->busy = false;
    if (rm->free_pending) {
        rm->free_pending = false;
        relay_release(rm);
    }
}

static int relay_emit(void *ud, const uint8_t *frame, size_t len)
{
    ec_client *c = ud;
    return ec_conn_send_ws(c, WS_OP_BINARY, frame, len, NULL) == 0 ? 0 : -EPIPE;
}

static void relay_message(void *ud, const char *text, size_t len)
{
    ec_client *c = ud;
    c->deliver(c, text, len);
}

static int remote_open(ec_client *c, int64_t deadline, ec_error *err)
{
    struct ec_remote *rm = rm_of(c);
    struct ec_registry_req rq = {.base_url = rm->base_url,
                                 .environment_id = rm->environment_id,
                                 .bearer_token = rm->token,
                                 .ca_file = c->ca_file};
    rm->last_error[0] = 0;
    rm->rejected = false;
    for (int attempt = 0;; attempt++) {
        struct ec_bundle b;
        int rc = ec_registry_connect(&rq, rm->key_json, deadline, &b, err);
        if (rc) return rc;
        rc = ec_conn_set_url(c, b.url, NULL);
        if (rc) /* not echoed: the query holds the rendezvous signature */
            rc = ec_fail(err, EC_ERR_PROTOCOL, 0,
                         "registry: the rendezvous URL is not a ws:// or wss:// URL");
        if (rc == 0) rc = ec_conn_open_ws(c, deadline, err);
        if (rc == -EC_ERR_TRANSPORT && err && err->code == 401 && attempt == 0) {
            ec_bundle_clear(&b); /* a stale signed URL: one fresh bundle */
            continue;
        }
        if (rc) {
            ec_bundle_clear(&b);
            return rc;
        }
        if (rm->abandoned[0]) {
            /* Best effort, before our new stream: a rendezvous that refuses it costs
             * nothing, the resume then retries on -32010 until the executor notices. */
            uint8_t *fb = NULL;
            size_t fl = 0;
            if (ec_relay_reset_frame(rm->abandoned, EC_RESET_REASON, &fb, &fl) == 0)
                ec_conn_send_ws(c, WS_OP_BINARY, fb, fl, NULL);
            free(fb);
            rm->abandoned[0] = 0;
        }
        struct ec_relay_params p = {.self = &rm->key,
                                    .executor = &b.executor_key,
                                    .environment_id = rm->environment_id,
                                    .registration_id = b.registration_id,
                                    .authorization = b.authorization};
        enter(rm);
        rc = ec_relay_start(&rm->relay, &p, relay_emit, relay_message, c);
        leave(rm);
        ec_bundle_clear(&b);
        if (rc) {
            ec_conn_drop(c);
            return ec_fail(err, EC_ERR_TRANSPORT, 0, "relay: %s",
                           rm->last_error[0] ? rm->last_error : rm->relay.error);
        }
        while (c->fd >= 0 && rm->relay.state == EC_RELAY_HANDSHAKE) {
            int left = ec_remaining(deadline);
            if (left == 0) {
                ec_conn_drop(c);
                return ec_fail(err, EC_ERR_TIMEOUT, 0,
                               "relay: the executor did not answer the Noise handshake");
            }
            ec_conn_read(c, left, NULL);
        }
        if (rm->rejected || rm->relay.credentials_rejected) {
            /* Terminal, like the registry's own 401: the reconnect loop stops on it. */
            ec_conn_drop(c);
            return ec_fail(err, EC_ERR_TRANSPORT, 401, "%s",
                           rm->last_error[0] ? rm->last_error : rm->relay.error);
        }
        if (c->fd < 0 || rm->relay.state != EC_RELAY_OPEN) {
            ec_conn_drop(c);
            return ec_fail(err, EC_ERR_TRANSPORT, 0, "relay: %s",
                           rm->last_error[0] ? rm->last_error
                                             : "the rendezvous closed the connection during "
                                               "the handshake");
        }
        return 0;
    }
}

static int remote_send(ec_client *c, const char *text, size_t len, ec_error *err)
{
    struct ec_remote *rm = rm_of(c);
    if (c->fd < 0 || rm->relay.state != EC_RELAY_OPEN)
        return ec_fail(err, EC_ERR_TRANSPORT, 0, "connection lost");
    enter(rm);
    int rc = ec_relay_send(&rm->relay, text, len);
    leave(rm);
    if (rc == -EMSGSIZE && c->fd >= 0 && rm->relay.state == EC_RELAY_OPEN)
        return ec_fail(err, EC_ERR_USAGE, 0, "message too large for the relay (%zu bytes)", len);
    if (rc) {
        ec_conn_drop(c); /* a spent nonce cannot be re-sent: this stream is over */
        return ec_fail(err, EC_ERR_TRANSPORT, 0, "connection lost: %s",
                       rm->last_error[0] ? rm->last_error : "relay send failed");
    }
    return 0;
}

static int remote_on_ws_message(ec_client *c, int opcode, const uint8_t *p, size_t n)
{
    struct ec_remote *rm = rm_of(c);
    if (opcode != WS_OP_BINARY) {
        snprintf(rm->last_error, sizeof rm->last_error,
                 "the rendezvous sent a text message (relay frames are binary)");
        return -1;
    }
    if (rm->relay.state != EC_RELAY_HANDSHAKE && rm->relay.state != EC_RELAY_OPEN) return -1;
    enter(rm);
    int rc = ec_relay_on_frame(&rm->relay, p, n);
    leave(rm);
    return rc < 0 ? -1 : 0;
}

/* A clean goodbye: the executor drops the stream (and detaches the session) now. */
static void remote_on_close(ec_client *c)
{
    struct ec_remote *rm = rm_of(c);
    if (rm->relay.state != EC_RELAY_OPEN) return;
    uint8_t *fb = NULL;
    size_t fl = 0;
    if (ec_relay_reset_frame(rm->relay.stream_id, EC_RESET_REASON, &fb, &fl) == 0)
        ec_conn_send_ws(c, WS_OP_BINARY, fb, fl, NULL);
    free(fb);
    rm->relay.state = EC_RELAY_FAILED; /* not abandoned: nothing to reset later */
}

static void remote_on_drop(ec_client *c)
{
    struct ec_remote *rm = rm_of(c);
    if (rm->busy)
        rm->free_pending = true;
    else
        relay_release(rm);
}

static void remote_destroy(ec_client *c)
{
    struct ec_remote *rm = rm_of(c);
    if (!rm) return;
    relay_release(rm);
    noise_ik_static_key_wipe(&rm->key);
    json_decref(rm->key_json);
    free(rm->base_url);
    free(rm->environment_id);
    if (rm->token) {
        memset(rm->token, 0, strlen(rm->token));
        free(rm->token);
    }
    free(rm);
    c->ml_state = NULL;
}

static const struct ec_msg_layer remote_layer = {
    .open = remote_open,
    .send = remote_send,
    .on_ws_message = remote_on_ws_message,
    .on_close = remote_on_close,
    .on_drop = remote_on_drop,
    .destroy = remote_destroy,
};

int ec_remote_init(ec_client *c, const ec_client_options *o, ec_error *err)
{
    if (strncmp(o->remote_url, "http://", 7) != 0 && strncmp(o->remote_url, "https://", 8) != 0)
        return ec_fail(err, EC_ERR_USAGE, 0,
                       "bad registry URL `%s`: expected http://HOST[:PORT] or https://...",
                       o->remote_url);
    const char *env = o->environment_id;
    while (env && (*env == ' ' || *env == '\t'))
        env++;
    if (!env || !*env) return ec_fail(err, EC_ERR_USAGE, 0, "remote mode needs an environment id");
    struct ec_remote *rm = xcalloc(1, sizeof *rm);
    rm->base_url = xstrdup(o->remote_url);
    rm->environment_id = xstrdup(env);
    size_t el = strlen(rm->environment_id);
    while (el > 0 && (rm->environment_id[el - 1] == ' ' || rm->environment_id[el - 1] == '\t'))
        rm->environment_id[--el] = 0;
    rm->token = o->bearer_token ? xstrdup(o->bearer_token) : NULL;
    c->ml = &remote_layer;
    c->ml_state = rm;
    /* Behind a rendezvous the executor's side of a stream can vanish silently. */
    c->liveness_ms = o->liveness_ms < 0 ? 0 : o->liveness_ms > 0 ? o->liveness_ms : 30000;
    /* A rendezvous (or a proxy before it) may drop an idle socket: Ping it. */
    c->keepalive_ms = o->keepalive_ms < 0 ? 0 : o->keepalive_ms > 0 ? o->keepalive_ms : 30000;
    if (noise_ik_static_key_generate(&rm->key, NULL, NULL) != 0)
        return ec_fail(err, EC_ERR_TRANSPORT, 0, "cannot generate the harness Noise key");
    rm->key_json = noise_ik_public_key_to_json(&rm->key.pub);
    return 0;
}
