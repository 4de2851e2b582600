/* execclient: the C client library of exec-server (libexecclient).
 *
 * Speaks the exec-server protocol (docs/PROTOCOL.md in the exec-server sources;
 * execclient(3)) over one WebSocket (ws:// or wss://) to our exec-server or to the
 * reference `codex exec-server`, or (remote mode, docs/REMOTE.md) through an environment
 * registry and its rendezvous relay, Noise-encrypted end to end, or (program mode) to
 * a local command such as `exec-server --listen stdio` over its stdin/stdout.
 * Plain sockets and poll(); no libuv, no global state, and no signal handlers touched
 * (sends use MSG_NOSIGNAL). A client creates no threads; the one object that does is
 * ec_envs (below), which connects its environments in the background.
 *
 * Two ways to drive it:
 *  - blocking: every call waits for its reply (with the client's call timeout), and
 *    ec_process_next_event() waits for the next output/exit/close event;
 *  - from a host event loop: watch ec_client_fd() for readability and call
 *    ec_client_process_ready(); pushed process events are queued on their handles and
 *    ec_process_next_event(p, 0, ...) pops them without blocking.
 *
 * Errors: functions return 0 on success or a negative ec_err_kind (e.g.
 * -EC_ERR_TIMEOUT) and, when `err` is not NULL, fill it with the kind, the server's
 * JSON-RPC code (EC_ERR_SERVER only) and a one-line message.
 *
 * Ownership: every returned pointer says who owns it. "Owned by the client/handle"
 * means valid until that object is closed/freed (or the stated next call); "caller
 * frees" means free() (or the named *_free function).
 *
 * Threads: a client and its process handles belong to one thread at a time (no
 * internal locks); use one client per thread, or lock around them. Each object added
 * for many environments (ec_env_file, ec_envs, ec_step, ec_http_stream) says its own
 * rule where it is declared.
 *
 * Paths: fs functions and the process cwd take native absolute paths; the library
 * converts them to and from `file:` URIs. */
#ifndef EXECCLIENT_H
#define EXECCLIENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EC_API __attribute__((visibility("default")))

typedef enum ec_err_kind {
    EC_OK = 0,
    EC_ERR_TRANSPORT = 1,    /* could not connect, handshake failed, or connection lost */
    EC_ERR_SERVER = 2,       /* the server answered with a JSON-RPC error (code, message) */
    EC_ERR_TIMEOUT = 3,      /* no answer / no event within the deadline */
    EC_ERR_PROTOCOL = 4,     /* the server sent something this library cannot understand */
    EC_ERR_USAGE = 5,        /* bad argument (bad URL, empty argv, ...) */
    EC_ERR_SESSION_LOST = 6, /* resume refused (unknown session): terminal for the client */
} ec_err_kind;

typedef struct ec_error {
    ec_err_kind kind;
    int64_t code;      /* JSON-RPC error code when kind == EC_ERR_SERVER, else 0 */
    char message[512]; /* one line, NUL-terminated */
} ec_error;

/* Static text for a kind ("transport", "server", ...). */
EC_API const char *ec_err_kind_name(ec_err_kind kind);

/* ---- client ------------------------------------------------------------------- */

typedef struct ec_client ec_client;

typedef struct ec_client_options {
    const char *url;          /* ws://HOST:PORT[/PATH]; required unless remote_url is
                                 set (below). Copied. */
    const char *bearer_token; /* sent as "Authorization: Bearer <token>" when set (to the
                                 registry in remote mode). Copied. */
    const char *client_name;  /* initialize.clientName; default "exec-client". Copied. */
    int connect_timeout_ms;   /* TCP connect + upgrade + initialize; default 10000 */
    int call_timeout_ms;      /* per blocking call; default 60000; <0 waits forever */
    int reconnect_timeout_ms; /* >0: on connection loss, resume the session for up to
                                 this long (one shared attempt); 0: no reconnect */
    int refused_timeout_ms;   /* reconnect: give up once the server has refused every
                                 connection (ECONNREFUSED: nothing listens) this long;
                                 0: reconnect_timeout_ms */
    int lag_ms;               /* exited but no close after this long while waiting:
                                 one catch-up process/read; default 5000 */
    bool skip_initialize;     /* connect only (raw tools such as `exec-client rpc`) */
    /* Called (from inside whatever call noticed it) when the connection drops and a
     * resume starts (EC_RECONNECTING), succeeds (EC_RECONNECTED) or fails for good
     * (EC_RECONNECT_FAILED). Optional; it must not call back into the client. */
    void (*on_reconnect)(void *ud, int phase);
    void *on_reconnect_ud;
    /* wss:// only: PEM file of the CA(s) to trust instead of the system store
     * (which honours SSL_CERT_FILE / SSL_CERT_DIR). Copied. */
    const char *ca_file;
    /* Remote mode (docs/REMOTE.md): reach the executor registered as `environment_id` at
     * the environment registry whose base URL (http:// or https://) is `remote_url`,
     * instead of dialing `url` (which is then ignored). Every physical connection
     * (the first and each reconnect) asks the registry for a fresh connect bundle,
     * sending `bearer_token` there (never to the rendezvous), pins the executor key
     * the bundle names, and carries the JSON-RPC messages Noise-encrypted in relay
     * frames through the rendezvous. The client's own Noise key is made once and kept
     * across reconnects. ca_file also applies to an https registry and a wss
     * rendezvous. Both copied. */
    const char *remote_url;
    const char *environment_id;
    /* Remote mode only: while ec_process_next_event() waits on a running process that
     * has been quiet this long, one process/read asks the executor for news. A stream
     * that died at the executor's end (its rendezvous socket dropped) then gets reset
     * and the session is resumed on a new one, instead of waiting for ever. Default
     * 30000; <0 never. */
    int liveness_ms;
    /* Program mode: start this command (argv[0] looked up in PATH, in a process group
     * of its own) and speak newline-delimited JSON-RPC over its stdin/stdout, e.g.
     * {"exec-server", "--listen", "stdio", NULL} or an ssh command line that runs one
     * remotely. Takes precedence over url and remote_url (then ignored). There is no
     * resume over stdio: when the program exits the client is lost for good
     * (reconnect_timeout_ms is ignored), and the error says how it exited. Closing the
     * client closes the program's stdin, waits up to 2 s for it to exit, then kills
     * its process group. NULL-terminated; copied. */
    const char *const *program_argv;
    const char *const *program_env; /* "K=V" set on top of this process's environment
                                       (NULL-terminated; copied) */
    const char *program_cwd;        /* the program's working directory; NULL: ours */
    int program_stderr_fd;          /* the program's stderr: 0 = ours (inherited), -1 =
                                       /dev/null, otherwise this descriptor */
    /* Remote mode only: a WebSocket Ping to the rendezvous this often, none while one
     * is unanswered; a Ping without a Pong for twice this long drops the connection
     * (then resumed like any loss). Pings go out while the client waits inside a call;
     * a host that drives ec_client_fd() itself calls ec_client_process_ready() at
     * least this often. Default 30000 (the reference executor's interval); <0 never. */
    int keepalive_ms;
    /* Resume this session instead of creating one: initialize{resumeSessionId}. A
     * session that another connection holds fails with EC_ERR_SERVER and code -32010;
     * an unknown one with code -32600. Copied. */
    const char *resume_session_id;
} ec_client_options;

enum { EC_RECONNECTING = 1, EC_RECONNECTED = 2, EC_RECONNECT_FAILED = 3 };

/* Connects, upgrades to WebSocket, then initialize + initialized (unless
 * skip_initialize). On success *out is a new client the caller closes with
 * ec_client_close(). */
EC_API int ec_client_connect(const ec_client_options *opts, ec_client **out, ec_error *err);

/* Closes the connection and frees the client and every process handle still open. */
EC_API void ec_client_close(ec_client *c);

/* The session id from initialize. Owned by the client (NULL with skip_initialize). */
EC_API const char *ec_client_session_id(const ec_client *c);

/* initialize's environmentInfo (or NULL). Borrowed reference owned by the client. */
EC_API json_t *ec_client_environment_info(const ec_client *c);

/* environmentInfo.capabilities.<name> is true. */
EC_API bool ec_client_has_capability(const ec_client *c, const char *name);

/* The socket to poll for POLLIN in a host event loop; changes after a reconnect, so
 * fetch it again after each ec_client_process_ready(). -1 when disconnected. */
EC_API int ec_client_fd(const ec_client *c);

/* Keep-alive for interactive hosts (what ssh's ServerAliveInterval does): ms since
 * the last byte arrived from the server (-1 while disconnected), and a WebSocket Ping
 * to provoke one (a live server answers at once, even while its processes are
 * quiet). A host that sees no byte for a while after its pings can give up instead
 * of waiting on a server that hangs. The Ping is sent without waiting; 0 or an error. */
EC_API int ec_client_idle_ms(const ec_client *c);
EC_API int ec_client_ping(ec_client *c, ec_error *err);
/* For a host that polls ec_client_fd() itself: how many ms it may wait before it must
 * call ec_client_process_ready() even if the socket stays quiet (the keepalive Ping of
 * remote mode is due then); -1 when nothing is due. */
EC_API int ec_client_wait_hint_ms(const ec_client *c);

/* Non-blocking: reads what the socket has, answers pings, matches replies and
 * queues pushed process events on their handles (and starts any catch-up reads they
 * need). Returns 0, or a negative kind when the connection is lost for good. If the
 * connection drops and reconnect_timeout_ms is set, the resume happens inside this
 * call and blocks for up to that long. Handles at most about 1 MiB per call, so with a
 * level-triggered loop (poll) it is simply called again while the fd stays readable. */
EC_API int ec_client_process_ready(ec_client *c, ec_error *err);

/* Generic blocking JSON-RPC call. Steals the reference to `params` (may be NULL).
 * On success *result (if result is not NULL) is a new reference the caller
 * json_decref()s. Not replayed after a reconnect: a call in flight when the
 * connection drops fails with EC_ERR_TRANSPORT. */
EC_API int ec_client_call(ec_client *c, const char *method, json_t *params, json_t **result,
                          ec_error *err);

/* Raw mode helpers (for debugging tools): send one text message as is, and receive
 * every message that is not a reply to this library's own requests nor a process
 * notification of an open handle. `text` is borrowed for the duration of the call;
 * the hook must not call back into the client. */
typedef void (*ec_message_fn)(void *ud, const char *text, size_t len);
EC_API void ec_client_set_message_hook(ec_client *c, ec_message_fn fn, void *ud);
EC_API int ec_client_send_text(ec_client *c, const char *text, size_t len, ec_error *err);
/* Waits up to timeout_ms (<0 forever) for socket input and handles it. */
EC_API int ec_client_poll(ec_client *c, int timeout_ms, ec_error *err);

/* Successful reconnects so far (each resumed the same session). */
EC_API unsigned ec_client_reconnects(const ec_client *c);

/* ---- processes ---------------------------------------------------------------- */

typedef struct ec_process ec_process;

typedef struct ec_start_options {
    const char *process_id;  /* NULL: the library picks a unique one */
    const char *const *argv; /* NULL-terminated, non-empty */
    const char *cwd;         /* absolute path; NULL: "/" */
    const char *const *env;  /* NULL-terminated "K=V" list: the child's whole
                                environment (NULL: empty) */
    bool tty;                /* run on a PTY (output stream EC_STREAM_PTY) */
    bool pipe_stdin;         /* pipe mode: accept ec_process_write() */
    const char *arg0;        /* optional argv[0] seen by the child */
    /* The PTY's initial window (tty only; 0 = the server's 24 x 80). Sent only when
     * the server advertises processStartSize; otherwise ignored. */
    unsigned short rows, cols;
    /* "all", "core" or "none": the child starts from the server's environment
     * filtered this way (envPolicy, docs/PROTOCOL.md §5.1.3), and `env` is laid on top.
     * NULL: `env` is the whole environment. */
    const char *env_inherit;
} ec_start_options;

typedef enum ec_stream { EC_STREAM_STDOUT, EC_STREAM_STDERR, EC_STREAM_PTY } ec_stream;

typedef enum ec_event_type {
    EC_EVENT_OUTPUT = 1, /* bytes in data/len from stream */
    EC_EVENT_EXITED,     /* exit_code (128+N for signal N in pipe mode), sandbox_denied */
    EC_EVENT_CLOSED,     /* all output delivered; the last event of a process */
    EC_EVENT_RESYNC,     /* the connection dropped; the stream is being caught up through
                            process/read after resume. Informational: keep reading. */
} ec_event_type;

typedef struct ec_event {
    ec_event_type type;
    uint64_t seq; /* server seq, 0 when learned from a process/read result */
    ec_stream stream;
    const uint8_t *data; /* owned by the handle; valid until the next call on it */
    size_t len;
    int exit_code;
    bool sandbox_denied;
} ec_event;

/* Starts a process. Never replayed: if the connection drops before the reply, this
 * fails with EC_ERR_TRANSPORT. On success *out is a handle the caller frees with
 * ec_process_free() (or that ec_client_close() frees). */
EC_API int ec_process_start(ec_client *c, const ec_start_options *o, ec_process **out,
                            ec_error *err);

/* Next event of the process, in seq order, each at most once. timeout_ms: 0 polls,
 * <0 waits forever. -EC_ERR_TIMEOUT when nothing came in time. After
 * EC_EVENT_CLOSED it returns -EC_ERR_USAGE ("process closed").
 * Pending events are buffered on the handle. A caller that falls more than 32 MiB
 * behind makes the handle "lag": pushed output is no longer buffered, and once the
 * caller has caught up one process/read fetches what the server still retains (its
 * window is 1 MiB). So keep consuming events while you issue other calls. */
EC_API int ec_process_next_event(ec_process *p, int timeout_ms, ec_event *ev, ec_error *err);

/* Output in as few pieces as it came: from now on, an EC_EVENT_OUTPUT from
 * ec_process_next_event() covers every byte of its stream already received in order
 * behind it (what one read of the socket brought, up to about 1 MiB), as one
 * contiguous block; seq is then the last chunk's. The bytes are decoded from the
 * wire straight into the handle's buffer, never through a JSON tree, so a program
 * that relays output (to a terminal, a file, a pipe) makes one write per batch
 * instead of one per chunk of the server (about 8 KiB each). Off by default: one
 * event per chunk, as before. */
EC_API void ec_process_set_merge_output(ec_process *p, bool on);

/* Writes to stdin / the PTY. Each write gets a fresh writeId; after a reconnect a
 * write in flight is retried with the same writeId (the server applies it once). */
EC_API int ec_process_write(ec_process *p, const void *data, size_t len, ec_error *err);
/* SIGINT to the process group (process/signal interrupt). */
EC_API int ec_process_interrupt(ec_process *p, ec_error *err);
/* Any signal to the process group: "interrupt", a name ("TERM", "SIGHUP") or a
 * number as text. Beyond interrupt it needs the server's processSignalAny
 * capability: without it -EC_ERR_USAGE (nothing is sent). */
EC_API int ec_process_signal(ec_process *p, const char *signal, ec_error *err);
/* Resizes the process's PTY (the child gets SIGWINCH). Needs processResize:
 * without it -EC_ERR_USAGE (nothing is sent). */
EC_API int ec_process_resize(ec_process *p, unsigned rows, unsigned cols, ec_error *err);
/* End of input: after the bytes already written, a pipe is closed and a PTY gets
 * its EOF character. Needs processCloseStdin: without it -EC_ERR_USAGE. */
EC_API int ec_process_close_stdin(ec_process *p, ec_error *err);
/* Tells the server the session is finished: it ends (its processes are killed)
 * when this connection closes, instead of waiting to be resumed. Needs the
 * sessionClose capability; without it this is a no-op returning 0. */
EC_API int ec_client_end_session(ec_client *c, ec_error *err);
/* SIGKILL to the process group; *was_running (may be NULL) from the reply. */
EC_API int ec_process_terminate(ec_process *p, bool *was_running, ec_error *err);

/* A handle on a process that is already running (or done): one this session
 * started earlier (after a resume: session_id NULL or this session's id), or one of
 * another session the server lets this client see (session/list; needs the
 * processAttach capability, ours). Its events start with the output the server still
 * retains (its last 1 MiB) and continue with everything after, with no gap and no
 * repeat; writes, signals, resize and terminate act on that process. A viewer of
 * another session's process gets -EC_ERR_SESSION_LOST from ec_process_next_event
 * once that session ends. The caller frees the handle with ec_process_free(). */
EC_API int ec_process_attach(ec_client *c, const char *session_id, const char *process_id,
                             ec_process **out, ec_error *err);

/* The processId. Owned by the handle. */
EC_API const char *ec_process_id(const ec_process *p);
EC_API bool ec_process_closed(const ec_process *p);

typedef struct ec_process_stats {
    uint64_t reads_sent;         /* process/read requests sent for this process */
    uint64_t duplicates_dropped; /* events seen twice (by seq) and dropped */
    uint64_t gaps_detected;      /* notifications that arrived after a missing seq */
    uint64_t resyncs;            /* reconnects this process was caught up after */
    uint64_t lags;               /* times the caller fell more than 32 MiB behind: pushed
                                    output was dropped and fetched again by one read */
} ec_process_stats;
EC_API void ec_process_get_stats(const ec_process *p, ec_process_stats *out);

/* Forgets the handle (the remote process is not killed). */
EC_API void ec_process_free(ec_process *p);

/* ---- TCP forwarding (ours: capability tcpForward) ------------------------------- */

/* A TCP connection the server opens for this client (tcp/connect, what ssh -L
 * uses), carried over the client's connection. Everything is non-blocking: a host
 * event loop calls ec_client_process_ready() when ec_client_fd() is readable and then
 * takes each stream's events with ec_tcp_next_event(t, 0, ...). Streams belong to the
 * connection: a lost connection ends them (EC_TCP_CLOSED with an error), and they are
 * not resumed. Flow control is the library's: the server sends at most a window of
 * bytes ahead of what the caller has taken (an event's data is consumed when the next
 * event is asked for), and ec_tcp_write_room() says how much may be written now. */
typedef struct ec_tcp ec_tcp;

typedef enum ec_tcp_event_type {
    EC_TCP_CONNECTED = 1, /* the server reached host:port; writes may start */
    EC_TCP_DATA,          /* bytes from the peer in data/len */
    EC_TCP_EOF,           /* the peer finished sending (half-close) */
    EC_TCP_CLOSED,        /* the stream is over (the last event); error says why, or
                             is NULL for a clean end. Also a failed connect. */
} ec_tcp_event_type;

typedef struct ec_tcp_event {
    ec_tcp_event_type type;
    const uint8_t *data; /* owned by the handle; valid until the next event is asked for */
    size_t len;
    const char *error; /* EC_TCP_CLOSED: NULL, or the reason (owned by the handle) */
} ec_tcp_event;

/* Starts connecting to host:port from the server's side, without waiting: the
 * stream's first event is EC_TCP_CONNECTED or EC_TCP_CLOSED. Needs the tcpForward
 * capability (the server runs with --allow-tcp-forwarding): -EC_ERR_USAGE without it,
 * and nothing is sent. The caller frees the handle with ec_tcp_close(). */
EC_API int ec_tcp_open(ec_client *c, const char *host, unsigned port, ec_tcp **out, ec_error *err);
/* The next event of the stream; timeout_ms 0 only looks, <0 waits. -EC_ERR_TIMEOUT
 * when there is none; -EC_ERR_USAGE after EC_TCP_CLOSED was returned. */
EC_API int ec_tcp_next_event(ec_tcp *t, int timeout_ms, ec_tcp_event *ev, ec_error *err);
/* Bytes ec_tcp_write() may send now (0 while the stream is not connected, or while
 * earlier writes are not yet taken by the peer's socket). */
EC_API size_t ec_tcp_write_room(const ec_tcp *t);
/* Sends bytes to the peer (tcp/data), without waiting for the reply. Writing more
 * than ec_tcp_write_room() is allowed but piles up on the server (which refuses past
 * 16 MiB queued). */
EC_API int ec_tcp_write(ec_tcp *t, const void *data, size_t len, ec_error *err);
/* No more bytes from us (the peer sees end of input); reading goes on. */
EC_API int ec_tcp_shutdown(ec_tcp *t, ec_error *err);
/* Aborts the stream if it is still open (tcp/close) and frees the handle. */
EC_API void ec_tcp_close(ec_tcp *t);

/* ---- filesystem ---------------------------------------------------------------- */

typedef struct ec_metadata {
    bool is_directory, is_file, is_symlink;
    uint64_t size;
    int64_t created_at_ms, modified_at_ms;
    /* Our server's extension (the reference reports none of these): has_mode says
     * whether mode/uid/gid were given; owner/group are "" when unknown. */
    bool has_mode;
    unsigned mode; /* permission bits, 0-07777 */
    unsigned uid, gid;
    char owner[64], group[64];
} ec_metadata;

typedef struct ec_dirent {
    char *name; /* owned by the array */
    bool is_directory, is_file;
} ec_dirent;

typedef struct ec_walk_entry {
    char *path; /* native absolute path, owned by the array */
    bool is_directory;
} ec_walk_entry;

typedef struct ec_walk_options {
    unsigned max_depth, max_directories, max_entries; /* 0: 64 / 10000 / 50000 */
    bool follow_directory_symlinks, prune_hidden_directories;
} ec_walk_options;

/* *data (caller frees; NUL-terminated for convenience, not counted in *len). */
EC_API int ec_fs_read_file(ec_client *c, const char *path, uint8_t **data, size_t *len,
                           ec_error *err);
EC_API int ec_fs_write_file(ec_client *c, const char *path, const void *data, size_t len,
                            ec_error *err);
EC_API int ec_fs_create_directory(ec_client *c, const char *path, bool recursive, ec_error *err);
EC_API int ec_fs_get_metadata(ec_client *c, const char *path, ec_metadata *out, ec_error *err);
EC_API int ec_fs_remove(ec_client *c, const char *path, bool recursive, bool force, ec_error *err);
/* chmod: permission bits (0-07777). Needs the fsPermissions capability (ours):
 * without it -EC_ERR_USAGE and nothing is sent. */
EC_API int ec_fs_set_permissions(ec_client *c, const char *path, unsigned mode, ec_error *err);
EC_API int ec_fs_copy(ec_client *c, const char *src, const char *dst, bool recursive,
                      ec_error *err);
/* rename(2) on the server (ours, capability fsRename): src replaces dst in one step
 * (dst is never absent; one file system; a symbolic link at dst is replaced itself).
 * EC_RENAME_KEEP_ATTRIBUTES: when dst is a regular file, src first takes its owner and
 * group (where the server may) and its permission bits; EC_RENAME_FSYNC: src is
 * flushed before and the directory after. Without the capability -EC_ERR_USAGE and
 * nothing is sent. */
#define EC_RENAME_KEEP_ATTRIBUTES 1u
#define EC_RENAME_FSYNC 2u
EC_API int ec_fs_rename(ec_client *c, const char *src, const char *dst, unsigned flags,
                        ec_error *err);
/* *out: native path, caller frees. */
EC_API int ec_fs_canonicalize(ec_client *c, const char *path, char **out, ec_error *err);
/* *entries: caller frees with ec_dirents_free(entries, n). */
EC_API int ec_fs_read_directory(ec_client *c, const char *path, ec_dirent **entries, size_t *n,
                                ec_error *err);
EC_API void ec_dirents_free(ec_dirent *entries, size_t n);
/* *entries: caller frees with ec_walk_entries_free(entries, n). */
EC_API int ec_fs_walk(ec_client *c, const char *path, const ec_walk_options *o,
                      ec_walk_entry **entries, size_t *n, bool *truncated, ec_error *err);
EC_API void ec_walk_entries_free(ec_walk_entry *entries, size_t n);

/* Random access. handle ids are chosen by the caller (at most 32 bytes); handles
 * belong to the connection and are lost on reconnect. write=true opens for
 * replace (needs capability fileWriteStreaming). */
EC_API int ec_fs_open(ec_client *c, const char *handle_id, const char *path, bool write,
                      ec_error *err);
/* *data: caller frees. */
EC_API int ec_fs_read_block(ec_client *c, const char *handle_id, uint64_t offset, size_t len,
                            uint8_t **data, size_t *n, bool *eof, ec_error *err);
EC_API int ec_fs_write_block(ec_client *c, const char *handle_id, uint64_t offset, const void *data,
                             size_t len, ec_error *err);
EC_API int ec_fs_close(ec_client *c, const char *handle_id, ec_error *err);

/* Whole-file streaming at the protocol's floor: several fs/readBlock or fs/writeBlock
 * requests in flight at once (the server runs them concurrently), each written by
 * hand with its base64 straight into the outgoing frame and each reply's base64
 * decoded without a JSON tree, so the client's CPU is a small part of the transfer.
 * Handles belong to the connection: a lost connection fails the transfer (it is not
 * resumed). */
typedef struct ec_transfer_options {
    unsigned window; /* blocks in flight; 0: 8 */
    size_t block;    /* bytes per block, at most 1 MiB (the protocol's limit); 0: 1 MiB */
    /* Called after each block with the bytes done so far (written to fd for a
     * download, acknowledged by the server for an upload); a non-zero return stops the
     * transfer, which then fails with -EC_ERR_USAGE "transfer cancelled". May be NULL. */
    int (*progress)(void *ud, uint64_t done);
    void *progress_ud;
} ec_transfer_options;

/* Copies the remote regular file `path` to fd (a file or a pipe; written in order
 * with write(2)) through fs/open + pipelined fs/readBlock + fs/close. *bytes (may be
 * NULL) gets the count written. o may be NULL. */
EC_API int ec_fs_download(ec_client *c, const char *path, int fd, const ec_transfer_options *o,
                          uint64_t *bytes, ec_error *err);
/* Copies fd, read until its end, to the remote file `path` (fs/open "replace",
 * pipelined fs/writeBlock, fs/close). Needs the fileWriteStreaming capability (without
 * it -EC_ERR_USAGE, nothing sent).
 *
 * Nothing half-written is ever under `path`, as with rsync: with the server's fsRename
 * (ours) the bytes go to a hidden temporary beside it (ec_temp_name; beside the file a
 * symbolic link at `path` names), which replaces `path` in one rename once complete and
 * flushed, keeping an existing file's owner (where the server may) and mode. On an
 * error, a cancel (progress, checked once more before the rename) or a lost
 * connection the old file stays whole and the temporary is removed, except when the
 * connection is lost: it cannot be, and the error message names it. A directory that
 * lets nobody add a file beside an existing one we may write gets it written in
 * place, as fs/writeFile does; so does any file on a server without fsRename (the
 * reference). */
EC_API int ec_fs_upload(ec_client *c, int fd, const char *path, const ec_transfer_options *o,
                        uint64_t *bytes, ec_error *err);
/* The hidden temporary name a transfer writes before renaming it to path, in path's
 * directory: DIR/.NAME.exec-client.XXXXXXXXXX (ten random letters and digits; NAME cut
 * to keep it within 255 bytes). Written to out (n bytes); NULL when it does not fit. */
EC_API char *ec_temp_name(const char *path, char *out, size_t n);

/* ---- http/request -------------------------------------------------------------- */

/* The server makes an HTTP(S) request on the client's behalf (PROTOCOL.md §7). */
typedef struct ec_http_header {
    const char *name; /* request: borrowed; response: lowercase, owned by the response */
    const char *value;
} ec_http_header;

typedef struct ec_http_req {
    const char *method;            /* sent as is ("GET", "POST", ...); NULL: "GET" */
    const char *url;               /* absolute http:// or https:// URL */
    const ec_http_header *headers; /* n_headers of them, order and repeats kept */
    size_t n_headers;
    const void *body; /* NULL: no body */
    size_t body_len;
    int timeout_ms;         /* whole-request deadline at the server; 0: none */
    bool no_redirects;      /* redirectPolicy "stop": a 3xx comes back as is (default:
                               up to 10 redirects are followed) */
    const char *request_id; /* NULL: the library picks a unique one */
} ec_http_req;

typedef struct ec_http_resp {
    int status;              /* any status: 4xx and 5xx are results, not errors */
    ec_http_header *headers; /* in received order, duplicates kept */
    size_t n_headers;
    uint8_t *body; /* the buffered body (NUL-terminated, not counted in
                      body_len); NULL for a streamed request */
    size_t body_len;
} ec_http_resp;

/* Buffered: status, headers and the whole body in *out, which the caller clears with
 * ec_http_resp_clear(). A request the server could not make (refused, timed out) is
 * EC_ERR_SERVER with its message. Not replayed after a reconnect. */
EC_API int ec_http_request(ec_client *c, const ec_http_req *rq, ec_http_resp *out, ec_error *err);
EC_API void ec_http_resp_clear(ec_http_resp *r);

/* Streamed: returns as soon as the headers are in (*head: status and headers, no
 * body; the caller clears it); the body then comes in pieces from
 * ec_http_stream_next(). The stream belongs to the client (the same one-thread rule)
 * and to its connection: a connection loss fails it with EC_ERR_TRANSPORT, even when
 * the session is resumed. Pieces are queued as they arrive, up to 64 MiB ahead of the
 * reader (beyond that the stream fails): keep reading. The caller frees the stream
 * with ec_http_stream_free(), or ec_client_close() does. */
typedef struct ec_http_stream ec_http_stream;
EC_API int ec_http_request_stream(ec_client *c, const ec_http_req *rq, ec_http_resp *head,
                                  ec_http_stream **out, ec_error *err);
/* The next piece: *data (owned by the stream, valid until the next call on it) and
 * *len; after the last piece one more call sets *done (with *len 0). timeout_ms: 0
 * polls, <0 waits forever. A body the server could not finish reading is
 * EC_ERR_SERVER with its reason. After done: -EC_ERR_USAGE. */
EC_API int ec_http_stream_next(ec_http_stream *s, int timeout_ms, const uint8_t **data, size_t *len,
                               bool *done, ec_error *err);
EC_API void ec_http_stream_free(ec_http_stream *s);

/* ---- environments.toml ------------------------------------------------------------ */

/* The file codex reads from CODEX_HOME, one ec_client_options per environment. The
 * schema is codex's: `default = "ID"|"local"|"none"`, `include_local = BOOL`, and
 * per `[[environments]]` an `id` (ASCII letters, digits, '-', '_'; at most 64; not
 * "local" or "none") and exactly one transport: `url = "ws://..."` (or wss://), or
 * `program = "CMD"` with optional `args = [..]`, `env = {K = "V"}` and `cwd` (spoken
 * to over its stdin/stdout); timeouts `connect_timeout_sec` (url) and
 * `initialize_timeout_sec`. Ours also takes `auth_bearer_token` (with url: sent on
 * the upgrade; with remote: to the registry only), `remote = "https://REGISTRY"`
 * with `environment_id = "ID"` (remote mode, a third transport) and `ca_file`.
 * Relative paths (cwd, ca_file) are taken from the file's directory. Unknown fields
 * are errors, as in codex. Errors are EC_ERR_USAGE with "line L, column C: ..." for
 * TOML syntax. An ec_env_file is immutable: any thread may read it; free it once. */
typedef struct ec_env_file ec_env_file;

/* path NULL: $CODEX_HOME/environments.toml, CODEX_HOME defaulting to ~/.codex. */
EC_API int ec_env_file_load(const char *path, ec_env_file **out, ec_error *err);
/* The same from text; config_dir (may be NULL: relative paths are then refused) is
 * where relative paths start. */
EC_API int ec_env_file_parse(const char *text, size_t len, const char *config_dir,
                             ec_env_file **out, ec_error *err);
EC_API size_t ec_env_file_count(const ec_env_file *f);
/* The i-th environment in file order: its id and its options (borrowed: valid until
 * ec_env_file_free). The options carry the transport, the token, the connect timeout
 * and reconnect_timeout_ms 30000 (0 for a program); copy them to change the rest. */
EC_API const char *ec_env_file_id(const ec_env_file *f, size_t i);
EC_API const ec_client_options *ec_env_file_options(const ec_env_file *f, size_t i);
EC_API const ec_client_options *ec_env_file_find(const ec_env_file *f, const char *id);
/* The default environment: an id, "local" (codex's in-process executor, which this
 * library does not have), or NULL for none. */
EC_API const char *ec_env_file_default(const ec_env_file *f);
EC_API bool ec_env_file_include_local(const ec_env_file *f);
EC_API void ec_env_file_free(ec_env_file *f);

/* ---- environments and step snapshots ------------------------------------------------ */

/* Many environments the way codex holds them. An environment is a stable
 * id that always names the same logical executor; its handle (an ec_client) is only
 * this process's current connection to it and may be replaced. A harness persists
 * ids, and for each step of its work captures the ready handles of the ids it selected
 * (ec_envs_capture): every call of that step goes through those exact handles
 * (ec_step_client), whatever happens to the registry meanwhile, and the next step
 * captures its own view.
 *
 * Environments connect lazily, in a background thread each: added idle, they start
 * when first used (captured, waited for, or ec_envs_start), and a capture does not
 * wait for them unless asked to (wait_ms). States: idle -> starting -> ready or
 * failed (with the reason); a ready handle that is lost for good (its reconnect window
 * passed, its session is gone, its program exited) becomes failed at the next look.
 * Within its reconnect window a handle reconnects and resumes as any client does
 * (reconnect_timeout_ms). A failed environment stays failed until ec_envs_start
 * retries it or ec_envs_add replaces it.
 *
 * Threads and ownership: every ec_envs_* function is safe from any thread (one
 * internal lock; none blocks on the network while holding it). The library creates
 * one thread per connect under way (signals blocked); ec_envs_free waits for them.
 * An ec_step is used by one thread at a time and released once. The clients a step
 * hands out keep the one-thread rule of any ec_client, and two steps that captured
 * the same handle share it: do not use it from two threads at once. A handle lives as
 * long as its environment still has it or a step holds it: process handles and
 * streams made through a step's client are valid until the step is released if the
 * environment was replaced or removed meanwhile, else until that too happens. */
typedef struct ec_envs ec_envs;
typedef struct ec_step ec_step;

typedef enum ec_env_state {
    EC_ENV_MISSING = 0, /* no environment by that id */
    EC_ENV_IDLE,        /* added, not started yet (lazy) */
    EC_ENV_STARTING,    /* connecting in the background */
    EC_ENV_READY,       /* connected: its handle serves calls */
    EC_ENV_FAILED,      /* the connect failed or the handle was lost for good */
} ec_env_state;

/* Static text: "missing", "idle", "starting", "ready", "failed". */
EC_API const char *ec_env_state_name(ec_env_state s);

EC_API ec_envs *ec_envs_new(void);
/* Drops every environment and waits for connects under way (each bounded by its
 * connect timeout). Steps still held keep their handles until released. */
EC_API void ec_envs_free(ec_envs *e);

/* Adds environment `id` (any non-empty text) with the options (deep-copied; the
 * on_reconnect callback and its ud are kept as they are and called from whatever
 * thread uses the handle), or replaces the options of the one that exists: its
 * current handle is dropped (steps that captured it keep it), and the new handle is
 * made at the next start. start: connect now instead of at first use. */
EC_API int ec_envs_add(ec_envs *e, const char *id, const ec_client_options *o, bool start,
                       ec_error *err);
/* Every environment of the file, idle (lazy), in file order. */
EC_API int ec_envs_add_file(ec_envs *e, const ec_env_file *f, ec_error *err);
/* -EC_ERR_USAGE when there is no such environment. */
EC_API int ec_envs_remove(ec_envs *e, const char *id, ec_error *err);
/* Idle or failed: start connecting (in the background). Otherwise nothing. */
EC_API int ec_envs_start(ec_envs *e, const char *id, ec_error *err);
/* Current state; for EC_ENV_FAILED, *reason (may be NULL) gets why. */
EC_API ec_env_state ec_envs_state(ec_envs *e, const char *id, ec_error *reason);
/* Starts the environment if idle, then waits up to timeout_ms (<0: no limit) until it
 * is ready (0) or failed (its reason, with the kind of the failure). */
EC_API int ec_envs_wait(ec_envs *e, const char *id, int timeout_ms, ec_error *err);

/* One step's snapshot of ids[0..n) (ids NULL: every environment), taken in one look:
 * a ready environment is captured with its handle; a starting, failed or missing one
 * is recorded as such, without a handle; an idle one is asked to start (and recorded
 * as starting). wait_ms > 0 first starts the idle ones among them and waits up to
 * that long (< 0: as long as it takes) for those starting to become ready or fail; 0
 * does not wait (a later step sees them ready). Never NULL; release it with
 * ec_step_release. */
EC_API ec_step *ec_envs_capture(ec_envs *e, const char *const *ids, size_t n, int wait_ms);
/* The selected ids in order (duplicates taken once): count and the i-th (borrowed
 * from the step). */
EC_API size_t ec_step_count(const ec_step *s);
EC_API const char *ec_step_id(const ec_step *s, size_t i);
/* The state captured for id (EC_ENV_MISSING also when id was not selected); for
 * EC_ENV_FAILED *reason (may be NULL) is borrowed from the step. */
EC_API ec_env_state ec_step_state(const ec_step *s, const char *id, const char **reason);
/* The handle captured for id, NULL unless it was ready. Borrowed: valid until the
 * step is released (see above for longer). */
EC_API ec_client *ec_step_client(const ec_step *s, const char *id);
EC_API void ec_step_release(ec_step *s);

/* Capability roots, as codex selects them: a thread's durable selection "root `id` at `path` in
 * environment `environment_id`", resolved per step through the step's captured
 * handles with capabilityRoots/discoverV1. Results are cached by (environment id,
 * path) in the ec_envs, not by handle: replacing an environment's handle neither
 * invalidates nor rediscovers them (one id names stable contents);
 * ec_envs_forget_roots drops them. A root-local failure (the `error` field) is
 * returned but not cached. */
typedef struct ec_selected_root {
    const char *id; /* the root's stable id, e.g. "demo@1" */
    const char *environment_id;
    const char *path; /* native absolute path in that environment */
} ec_selected_root;

typedef struct ec_resolved_root {
    char *id, *environment_id, *path; /* owned by the array */
    ec_client *client;                /* the step's captured handle (borrowed from the step) */
    json_t *discovery;                /* the root's discoverV1 entry: plugin, skills,
                                         namespaceManifests, warnings, error (a reference the array
                                         owns; its "id" is this root's). Read-only: its members are
                                         shared with the cache */
} ec_resolved_root;

/* Resolves roots[0..n) for this step, in order: a root whose environment the step
 * captured ready is resolved (from the cache, else one discoverV1 request per
 * environment for the roots it lacks); the others are omitted, as are the roots of
 * an environment whose discovery request failed (err, when not NULL, then gets the
 * first such failure while the call still returns 0). *out: caller frees with
 * ec_resolved_roots_free(*out, *nout). -EC_ERR_USAGE for a root without an id,
 * environment id or absolute path. */
EC_API int ec_step_resolve_roots(ec_step *s, const ec_selected_root *roots, size_t n,
                                 ec_resolved_root **out, size_t *nout, ec_error *err);
EC_API void ec_resolved_roots_free(ec_resolved_root *r, size_t n);
/* Drops the cached discovery of environment_id (NULL: of every environment). */
EC_API void ec_envs_forget_roots(ec_envs *e, const char *environment_id);

/* Native absolute path -> file: URI (caller frees), or NULL for a relative path. */
EC_API char *ec_path_to_uri(const char *path);
/* file: URI -> native path (caller frees), or NULL if it is not a file: URI. */
EC_API char *ec_uri_to_path(const char *uri);

#ifdef __cplusplus
}
#endif
#endif
