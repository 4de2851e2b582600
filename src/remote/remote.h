/* remote: `exec-server --remote URL --environment-id ID`, the executor side of
 * remote mode (REMOTE.md §1, §4.4).
 *
 * Generates one Noise identity per process, registers its public key with the
 * environment registry, then holds one WebSocket to the rendezvous URL the registry
 * returned and serves harnesses on it as relay virtual streams (relay_demux).
 * Reconnects with a jittered backoff of 0.5-1, 1-2, 2-4 ... 15-30 s; an upgrade
 * refused with a 4xx re-registers at once, any other failure reuses the URL. /readyz is 200 only
 * while registered and connected. Log lines carry no keys, authorizations, signed URLs or
 * plaintext. With opts.forward_url (`exec-server forward`), each stream is relayed to
 * that destination exec-server (relay_fwd.c) instead of being served here. */
#ifndef EXEC_REMOTE_REMOTE_H
#define EXEC_REMOTE_REMOTE_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "transport/conn.h"

struct remote_opts {
    const char *base_url;           /* --remote, trimmed */
    const char *environment_id;     /* --environment-id, trimmed, non-empty */
    const char *name;               /* --name (kept, not transmitted, as the reference) */
    const char *bearer;             /* registry bearer token, or NULL for none */
    const char *chatgpt_account_id; /* sent as chatgpt-account-id with the bearer
                                       (--chatgpt-token-stdin), or NULL */
    uint64_t ping_ms;               /* 0 = 30 s */
    uint64_t pong_deadline_ms;      /* 0 = 60 s */
    uint64_t backoff_ms;            /* backoff unit, 0 = 1 s (sleeps up to 30 units) */
    conn_message_fn on_message;     /* reader of every stream's messages (rpc_dispatch) */
    const char *forward_url;        /* `exec-server forward --connect`: relay every stream to
                                     * this ws:// exec-server instead (on_message unused) */
    /* --remote-transport direct (docs/REMOTE.md §8.6): a SigV4-signed
     * /direct/register, then one plain JSON-RPC WebSocket served by on_message.
     * The strings are copied; bearer and forward_url must be NULL. */
    bool direct;
    const char *aws_access_key, *aws_secret_key, *aws_session_token; /* token may be NULL */
    const char *aws_region, *aws_service;
};

/* Starts registering. on_fatal runs (once) when the executor cannot go on: the
 * registration or a re-registration failed. Returns 0 or a negative code (-EINVAL:
 * forward_url is not a ws:// URL). The options are copied. */
int remote_start(uv_loop_t *loop, const struct remote_opts *opts, void (*on_fatal)(void));

/* Closes the rendezvous socket and every stream, stops reconnecting (shutdown). */
void remote_stop(void);
/* Frees the state once the loop has ended (after remote_stop). */
void remote_cleanup(void);

/* Whether the registry URL may receive an API key (CODEX_API_KEY): https to
 * openai.com / openai.org or a subdomain, or http(s) to a loopback host. */
bool remote_api_key_url_allowed(const char *url);

#endif
