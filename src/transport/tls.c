/* tls: TLS for the listener (`--listen wss://...`), OpenSSL over memory BIOs.
 *
 * The TCP stream stays libuv's: ciphertext read from the socket is written into the
 * session's read BIO, plaintext comes out of SSL_read and goes to the HTTP/WebSocket
 * code as before; plaintext to send goes through SSL_write and the ciphertext that
 * lands in the write BIO is queued on the socket like any other bytes. OpenSSL never
 * touches the socket, so nothing blocks the loop, and the handshake simply advances
 * whenever bytes arrive. Modern settings only: TLS 1.2 with ECDHE and AEAD suites,
 * or TLS 1.3. The certificate and key are re-read on SIGHUP (tls_server_reload): new
 * connections use the new pair, a pair that fails to load leaves the old one in
 * place. */
#include "transport/tls.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "util/mem.h"

struct tls_session {
    SSL *ssl;
    BIO *rbio, *wbio; /* owned by ssl */
};

static SSL_CTX *server_ctx;
static SSL_CTX *client_ctx; /* remote mode's wss:// rendezvous client, made on first use */
static char *cert_path, *key_path;

static void last_error(char *err, size_t n, const char *what)
{
    unsigned long e = ERR_get_error();
    char buf[256] = "";
    if (e) ERR_error_string_n(e, buf, sizeof buf);
    snprintf(err, n, "%s%s%s", what, *buf ? ": " : "", buf);
    ERR_clear_error();
}

static SSL_CTX *load_ctx(const char *cert, const char *key, char *err, size_t n)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        last_error(err, n, "cannot create a TLS context");
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_cipher_list(ctx, "ECDHE+AESGCM:ECDHE+CHACHA20");
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                                 SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_RELEASE_BUFFERS);
    char what[600];
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
        snprintf(what, sizeof what, "cannot load the TLS certificate %s", cert);
        last_error(err, n, what);
    } else if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
        snprintf(what, sizeof what, "cannot load the TLS key %s", key);
        last_error(err, n, what);
    } else if (SSL_CTX_check_private_key(ctx) != 1) {
        snprintf(what, sizeof what, "the TLS key %s does not match the certificate %s", key,
                 cert);
        last_error(err, n, what);
    } else {
        return ctx;
    }
    SSL_CTX_free(ctx);
    return NULL;
}

int tls_server_configure(const char *cert, const char *key, char *err, size_t n)
{
    SSL_CTX *ctx = load_ctx(cert, key, err, n);
    if (!ctx) return -EINVAL; /* unreadable or unusable certificate or key */
    server_ctx = ctx;
    cert_path = xstrdup(cert);
    key_path = xstrdup(key);
    return 0;
}

bool tls_server_enabled(void)
{
    return server_ctx != NULL;
}

void tls_server_reload(void)
{
    if (!server_ctx) return;
    char err[700];
    SSL_CTX *ctx = load_ctx(cert_path, key_path, err, sizeof err);
    if (!ctx) {
        log_warn("TLS reload failed, keeping the current certificate: %s", err);
        return;
    }
    /* Sessions hold their own reference: live connections keep the old pair. */
    SSL_CTX_free(server_ctx);
    server_ctx = ctx;
    log_event("event=tls_reload cert=%s", cert_path);
}

void tls_server_shutdown(void)
{
    SSL_CTX_free(server_ctx);
    server_ctx = NULL;
    SSL_CTX_free(client_ctx);
    client_ctx = NULL;
    free(cert_path);
    free(key_path);
    cert_path = key_path = NULL;
}

struct tls_session *tls_session_new(void)
{
    struct tls_session *t = xcalloc(1, sizeof *t);
    t->ssl = SSL_new(server_ctx);
    t->rbio = BIO_new(BIO_s_mem());
    t->wbio = BIO_new(BIO_s_mem());
    BIO_set_mem_eof_return(t->rbio, -1); /* empty means "more to come", not EOF */
    SSL_set_bio(t->ssl, t->rbio, t->wbio);
    SSL_set_accept_state(t->ssl);
    return t;
}

struct tls_session *tls_client_session_new(const char *host, char *err, size_t n)
{
    if (!client_ctx) {
        SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
        if (!ctx) {
            last_error(err, n, "cannot create a TLS client context");
            return NULL;
        }
        SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
        SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
        if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
            last_error(err, n, "cannot load the system trust store");
            SSL_CTX_free(ctx);
            return NULL;
        }
        client_ctx = ctx;
    }
    struct tls_session *t = xcalloc(1, sizeof *t);
    t->ssl = SSL_new(client_ctx);
    t->rbio = BIO_new(BIO_s_mem());
    t->wbio = BIO_new(BIO_s_mem());
    BIO_set_mem_eof_return(t->rbio, -1);
    SSL_set_bio(t->ssl, t->rbio, t->wbio);
    SSL_set_connect_state(t->ssl);
    /* SNI only for names (RFC 6066 forbids literal addresses); the certificate
     * check covers both. */
    bool literal = strchr(host, ':') || strspn(host, "0123456789.") == strlen(host);
    if (!literal) SSL_set_tlsext_host_name(t->ssl, host);
    if (SSL_set1_host(t->ssl, host) != 1) {
        last_error(err, n, "cannot set the TLS peer name");
        tls_session_free(t);
        return NULL;
    }
    /* Writes the ClientHello into the write BIO for the caller to send. */
    SSL_do_handshake(t->ssl);
    ERR_clear_error();
    return t;
}

void tls_session_free(struct tls_session *t)
{
    if (!t) return;
    SSL_free(t->ssl);
    free(t);
}

bool tls_is_established(const struct tls_session *t)
{
    return SSL_is_init_finished(t->ssl);
}

int tls_feed(struct tls_session *t, const void *data, size_t n)
{
    /* a memory BIO only fails to grow */
    return BIO_write(t->rbio, data, (int)n) == (int)n ? 0 : -ENOMEM;
}

long tls_read(struct tls_session *t, void *out, size_t cap)
{
    int r = SSL_read(t->ssl, out, (int)cap);
    if (r > 0) return r;
    int e = SSL_get_error(t->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return 0;
    ERR_clear_error();
    return e == SSL_ERROR_ZERO_RETURN ? -ESHUTDOWN /* the peer's close_notify */
                                      : -EPROTO;
}

int tls_write(struct tls_session *t, const void *data, size_t n)
{
    size_t done = 0;
    while (done < n) {
        int r = SSL_write(t->ssl, (const char *)data + done, (int)(n - done));
        if (r <= 0) {
            ERR_clear_error();
            return -EIO; /* memory BIOs never want more room: this is a real failure */
        }
        done += (size_t)r;
    }
    return 0;
}

size_t tls_take_output(struct tls_session *t, char **out)
{
    size_t n = (size_t)BIO_ctrl_pending(t->wbio);
    *out = NULL;
    if (n == 0) return 0;
    *out = xmalloc(n);
    int r = BIO_read(t->wbio, *out, (int)n);
    return r > 0 ? (size_t)r : 0;
}
