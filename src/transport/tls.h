/* tls: TLS for the listener over memory BIOs (see tls.c). */
#ifndef EXEC_TRANSPORT_TLS_H
#define EXEC_TRANSPORT_TLS_H

#include <stdbool.h>
#include <stddef.h>

struct tls_session;

/* Loads libssl (dlopen, see tls.c) and the certificate chain and key (PEM). Returns 0,
 * or with err set -ELIBACC (libssl cannot be loaded) or -EINVAL (bad certificate/key). */
int tls_server_configure(const char *cert, const char *key, char *err, size_t n);
bool tls_server_enabled(void);
/* SIGHUP: re-reads both files (new connections get the new pair, live ones keep
 * theirs). Returns 0 (also when TLS is off) or -EINVAL with the reason in err, the
 * old pair staying in force. */
int tls_server_reload(char *err, size_t n);
void tls_server_shutdown(void);

struct tls_session *tls_session_new(void);
/* A client session to `host` (SNI and certificate name check against the system
 * trust store; SSL_CERT_FILE / SSL_CERT_DIR are honoured). The handshake starts
 * with the first tls_take_output. Returns NULL with err set (also when libssl cannot
 * be loaded). Caller frees. */
struct tls_session *tls_client_session_new(const char *host, char *err, size_t n);
/* A server session presenting cert/key (the network proxy's interception: one
 * certificate per intercepted host, made by the caller). NULL with err set. */
struct x509_st;
struct evp_pkey_st;
struct tls_session *tls_mitm_session_new(struct x509_st *cert, struct evp_pkey_st *key, char *err,
                                         size_t n);
/* Queues a close_notify (sent with the next tls_take_output) once established. */
void tls_close_notify(struct tls_session *t);
void tls_session_free(struct tls_session *t);
/* Whether the handshake has completed (a client writes only after it). */
bool tls_is_established(const struct tls_session *t);
/* Ciphertext from the socket. Returns 0 or -ENOMEM. */
int tls_feed(struct tls_session *t, const void *data, size_t n);
/* Plaintext out: >0 bytes, 0 when more ciphertext is needed, -EPROTO on
 * error, -ESHUTDOWN on the peer's close_notify. */
long tls_read(struct tls_session *t, void *out, size_t cap);
/* Plaintext in; the ciphertext waits in the session for tls_take_output. 0 or -EIO. */
int tls_write(struct tls_session *t, const void *data, size_t n);
/* Ciphertext to send (handshake records included): *out is malloc'd, NULL if none. */
size_t tls_take_output(struct tls_session *t, char **out);

#endif
