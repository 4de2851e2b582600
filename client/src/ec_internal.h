/* ec_internal: the private structs shared by the connection layer (ec_client.c) and the
 * typed method wrappers (ec_fs.c). Not installed. */
#ifndef EC_INTERNAL_H
#define EC_INTERNAL_H

#include "ec_proto.h"

#include <stdbool.h>
#include <stdint.h>

enum {
    EC_PENDING_CALL,  /* a blocking call; fails if the connection drops */
    EC_PENDING_RETRY, /* a blocking call re-sent after resume (process/write: same writeId) */
    EC_PENDING_READ,  /* a catch-up process/read owned by a process tracker */
};

struct ec_pending {
    struct ec_pending *next;
    int64_t id;
    int kind;
    char *method;     /* owned */
    json_t *params;   /* owned; kept so a retry can re-send it */
    ec_process *proc; /* EC_PENDING_READ: the process (NULL once it was freed) */
    bool sent;        /* the whole request went out on the current connection */
    bool done;
    json_t *result; /* owned until handed to the caller */
    ec_error err;
};

struct ec_process {
    ec_process *next;
    ec_client *c;
    char *id; /* owned */
    struct ec_track t;
    struct ec_pevent *cur; /* the event last returned to the user (owned) */
    struct ec_pending *read_pending;
    uint64_t next_write_id;
    int64_t last_progress_ms;
    bool broken; /* a catch-up read was refused; see broken_err */
    ec_error broken_err;
};

struct ec_client {
    char *host, *port, *path, *token, *client_name; /* owned */
    int call_timeout_ms, reconnect_timeout_ms, lag_ms;
    int fd;
    uint8_t *rbuf; /* raw bytes from the socket */
    size_t rlen, rcap;
    uint8_t *msgbuf; /* a fragmented message being reassembled */
    size_t msglen, msgcap;
    bool in_msg;
    uint8_t *wbuf; /* scratch for outgoing frames */
    size_t wlen, wcap;
    int64_t next_id;
    struct ec_pending *pending;
    ec_process *procs;
    unsigned proc_counter;
    char *session_id; /* owned */
    json_t *env_info; /* owned reference */
    bool dead;        /* terminal: dead_err says why */
    ec_error dead_err;
    bool reconnecting;
    unsigned reconnects;
    ec_message_fn hook;
    void *hook_ud;
    void (*on_reconnect)(void *ud, int phase);
    void *on_reconnect_ud;
    bool tls;               /* wss:// */
    char *ca_file;          /* owned, or NULL: the system store */
    struct ssl_ctx_st *ssl_ctx;
    struct ssl_st *ssl;     /* the connection's TLS session, NULL for ws:// */
};

int ec_fail(ec_error *err, ec_err_kind kind, int64_t code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int64_t ec_now_ms(void);
int64_t ec_deadline(int timeout_ms);
int ec_call_kind(ec_client *c, int kind, const char *method, json_t *params, json_t **result,
                 ec_error *err);
int ec_url_parse(const char *url, char **host, char **port, char **path, bool *tls,
                 ec_error *err);

#endif
