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
 * place.
 *
 * libssl is dlopen()ed on first use rather than linked, like libcurl (curl_dl.h): most
 * servers listen on ws:// or stdio and never make a TLS session, yet a linked libssl is
 * mapped and relocated into every one of them at start. That took make bench's idle
 * RSS (row 6a) from 3.7 to 4.2 MB, over the 4 MB target; /proc/PID/smaps of an idle
 * `--listen ws://` server showed libssl's 244 KB of a ~4.0 MB total, and without it
 * the total is ~3.75 MB and row 6a 3.9-4.0 MB. So its functions are called through
 * the table below, filled by dlsym the first time a wss:// listener is configured (at
 * startup, so a missing library stops the server there, not at the first connection)
 * or a wss:// rendezvous opens. libcrypto stays linked: auth, JWT, Noise and ML-KEM
 * use it, and the BIO_ and ERR_ calls here are its own. */
#include "transport/tls.h"

#include <dlfcn.h>
#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/env_vars.h"
#include "core/log.h"
#include "util/mem.h"

/* The libssl functions we call, typed from the OpenSSL headers. The SSL_CTX_set_mode
 * style macros expand to SSL_CTX_ctrl / SSL_ctrl, so those are in the table too and the
 * macros are spelled out where they are used. */
#define TLS_SSL_FUNCS(X)                                                                           \
    X(TLS_server_method)                                                                           \
    X(TLS_client_method)                                                                           \
    X(SSL_CTX_new)                                                                                 \
    X(SSL_CTX_free)                                                                                \
    X(SSL_CTX_ctrl)                                                                                \
    X(SSL_CTX_set_options)                                                                         \
    X(SSL_CTX_set_cipher_list)                                                                     \
    X(SSL_CTX_set_verify)                                                                          \
    X(SSL_CTX_set_default_verify_paths)                                                            \
    X(SSL_CTX_load_verify_locations)                                                               \
    X(SSL_CTX_use_certificate_chain_file)                                                          \
    X(SSL_CTX_use_PrivateKey_file)                                                                 \
    X(SSL_CTX_check_private_key)                                                                   \
    X(SSL_new)                                                                                     \
    X(SSL_free)                                                                                    \
    X(SSL_ctrl)                                                                                    \
    X(SSL_set_bio)                                                                                 \
    X(SSL_set_accept_state)                                                                        \
    X(SSL_set_connect_state)                                                                       \
    X(SSL_set1_host)                                                                               \
    X(SSL_do_handshake)                                                                            \
    X(SSL_is_init_finished)                                                                        \
    X(SSL_read)                                                                                    \
    X(SSL_write)                                                                                   \
    X(SSL_get_error)                                                                               \
    X(SSL_use_certificate)                                                                         \
    X(SSL_use_PrivateKey)                                                                          \
    X(SSL_shutdown)

#define TLS_SSL_SLOT(name) __typeof__(name) *name;
static struct {
    TLS_SSL_FUNCS(TLS_SSL_SLOT)
} libssl;
#undef TLS_SSL_SLOT

#define TLS_LIBSSL "libssl.so.3"
_Static_assert(OPENSSL_SHLIB_VERSION == 3, "TLS_LIBSSL names the ABI the headers describe");

/* Loads libssl once. Returns 0, or -ELIBACC (not loadable) / -ENOSYS (a function is
 * missing) with err set ("cannot load libssl.so.3: <dlerror>"); later calls repeat the
 * first answer. */
static int ssl_load(char *err, size_t n)
{
    static bool tried;
    static int rc;
    static char reason[300];
    if (!tried) {
        tried = true;
        void *h = dlopen(TLS_LIBSSL, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *dl = dlerror();
            snprintf(reason, sizeof reason, "cannot load %s: %s", TLS_LIBSSL,
                     dl ? dl : "unknown error");
            rc = -ELIBACC;
        }
#define TLS_SSL_SYM(name)                                                                          \
    if (rc == 0 && !(*(void **)&libssl.name = dlsym(h, #name))) {                                  \
        snprintf(reason, sizeof reason, "%s lacks %s (too old)", TLS_LIBSSL, #name);               \
        rc = -ENOSYS;                                                                              \
    }
        TLS_SSL_FUNCS(TLS_SSL_SYM)
#undef TLS_SSL_SYM
        if (h && rc < 0) dlclose(h);
    }
    if (rc < 0) snprintf(err, n, "%s", reason);
    return rc;
}

struct tls_session {
    SSL *ssl;
    BIO *rbio, *wbio; /* owned by ssl */
};

static SSL_CTX *server_ctx;
static SSL_CTX *client_ctx; /* remote mode's wss:// rendezvous client, made on first use */
static SSL_CTX *mitm_ctx;   /* the network proxy's interception: a certificate per session */
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
    SSL_CTX *ctx = libssl.SSL_CTX_new(libssl.TLS_server_method());
    if (!ctx) {
        last_error(err, n, "cannot create a TLS context");
        return NULL;
    }
    libssl.SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MIN_PROTO_VERSION, TLS1_2_VERSION, NULL);
    libssl.SSL_CTX_set_cipher_list(ctx, "ECDHE+AESGCM:ECDHE+CHACHA20");
    libssl.SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                                        SSL_OP_CIPHER_SERVER_PREFERENCE);
    libssl.SSL_CTX_ctrl(ctx, SSL_CTRL_MODE,
                        SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_RELEASE_BUFFERS, NULL);
    char what[600];
    if (libssl.SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
        snprintf(what, sizeof what, "cannot load the TLS certificate %s", cert);
        last_error(err, n, what);
    } else if (libssl.SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
        snprintf(what, sizeof what, "cannot load the TLS key %s", key);
        last_error(err, n, what);
    } else if (libssl.SSL_CTX_check_private_key(ctx) != 1) {
        snprintf(what, sizeof what, "the TLS key %s does not match the certificate %s", key, cert);
        last_error(err, n, what);
    } else {
        return ctx;
    }
    libssl.SSL_CTX_free(ctx);
    return NULL;
}

int tls_server_configure(const char *cert, const char *key, char *err, size_t n)
{
    char why[400];
    if (ssl_load(why, sizeof why) < 0) {
        snprintf(err, n, "--listen wss://: %s", why);
        return -ELIBACC; /* at startup, before any connection */
    }
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

int tls_server_reload(char *err, size_t n)
{
    if (!server_ctx) return 0;
    SSL_CTX *ctx = load_ctx(cert_path, key_path, err, n);
    if (!ctx) return -EINVAL;
    /* Sessions hold their own reference: live connections keep the old pair. */
    libssl.SSL_CTX_free(server_ctx);
    server_ctx = ctx;
    return 0;
}

void tls_server_shutdown(void)
{
    /* Either context exists only once libssl is loaded. */
    if (server_ctx) libssl.SSL_CTX_free(server_ctx);
    server_ctx = NULL;
    if (client_ctx) libssl.SSL_CTX_free(client_ctx);
    client_ctx = NULL;
    if (mitm_ctx) libssl.SSL_CTX_free(mitm_ctx);
    mitm_ctx = NULL;
    free(cert_path);
    free(key_path);
    cert_path = key_path = NULL;
}

/* A session on ctx over a pair of memory BIOs; NULL when SSL_new fails. */
static struct tls_session *session_on(SSL_CTX *ctx)
{
    SSL *ssl = libssl.SSL_new(ctx);
    if (!ssl) return NULL;
    struct tls_session *t = xcalloc(1, sizeof *t);
    t->ssl = ssl;
    t->rbio = BIO_new(BIO_s_mem());
    t->wbio = BIO_new(BIO_s_mem());
    BIO_set_mem_eof_return(t->rbio, -1); /* empty means "more to come", not EOF */
    libssl.SSL_set_bio(t->ssl, t->rbio, t->wbio);
    return t;
}

struct tls_session *tls_session_new(void)
{
    struct tls_session *t = session_on(server_ctx);
    if (t) libssl.SSL_set_accept_state(t->ssl);
    return t;
}

struct tls_session *tls_client_session_new(const char *host, char *err, size_t n)
{
    if (!client_ctx) {
        char why[400];
        if (ssl_load(why, sizeof why) < 0) {
            snprintf(err, n, "wss://: %s", why);
            return NULL;
        }
        SSL_CTX *ctx = libssl.SSL_CTX_new(libssl.TLS_client_method());
        if (!ctx) {
            last_error(err, n, "cannot create a TLS client context");
            return NULL;
        }
        libssl.SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MIN_PROTO_VERSION, TLS1_2_VERSION, NULL);
        libssl.SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
        libssl.SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
        if (libssl.SSL_CTX_set_default_verify_paths(ctx) != 1) {
            last_error(err, n, "cannot load the system trust store");
            libssl.SSL_CTX_free(ctx);
            return NULL;
        }
        /* The reference's custom CA variable (SSL_CERT_FILE is OpenSSL's own). */
        const char *ca = env_vars.codex_ca_certificate;
        if (ca && *ca && libssl.SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1) {
            last_error(err, n, "cannot load CODEX_CA_CERTIFICATE");
            libssl.SSL_CTX_free(ctx);
            return NULL;
        }
        client_ctx = ctx;
    }
    struct tls_session *t = session_on(client_ctx);
    if (!t) {
        last_error(err, n, "cannot create a TLS session");
        return NULL;
    }
    libssl.SSL_set_connect_state(t->ssl);
    /* SNI only for names (RFC 6066 forbids literal addresses); the certificate
     * check covers both. */
    bool literal = strchr(host, ':') || strspn(host, "0123456789.") == strlen(host);
    if (!literal)
        libssl.SSL_ctrl(t->ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
                        (void *)host);
    if (libssl.SSL_set1_host(t->ssl, host) != 1) {
        last_error(err, n, "cannot set the TLS peer name");
        tls_session_free(t);
        return NULL;
    }
    /* Writes the ClientHello into the write BIO for the caller to send. */
    libssl.SSL_do_handshake(t->ssl);
    ERR_clear_error();
    return t;
}

struct tls_session *tls_mitm_session_new(X509 *cert, EVP_PKEY *key, char *err, size_t n)
{
    if (!mitm_ctx) {
        char why[400];
        if (ssl_load(why, sizeof why) < 0) {
            snprintf(err, n, "credential masking: %s", why);
            return NULL;
        }
        SSL_CTX *ctx = libssl.SSL_CTX_new(libssl.TLS_server_method());
        if (!ctx) {
            last_error(err, n, "cannot create a TLS context");
            return NULL;
        }
        libssl.SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MIN_PROTO_VERSION, TLS1_2_VERSION, NULL);
        libssl.SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
        libssl.SSL_CTX_ctrl(ctx, SSL_CTRL_MODE, SSL_MODE_ENABLE_PARTIAL_WRITE, NULL);
        mitm_ctx = ctx;
    }
    struct tls_session *t = session_on(mitm_ctx);
    if (!t || libssl.SSL_use_certificate(t->ssl, cert) != 1 ||
        libssl.SSL_use_PrivateKey(t->ssl, key) != 1) {
        last_error(err, n, "cannot use the interception certificate");
        tls_session_free(t);
        return NULL;
    }
    libssl.SSL_set_accept_state(t->ssl);
    return t;
}

void tls_close_notify(struct tls_session *t)
{
    if (libssl.SSL_is_init_finished(t->ssl)) libssl.SSL_shutdown(t->ssl);
    ERR_clear_error();
}

void tls_session_free(struct tls_session *t)
{
    if (!t) return;
    libssl.SSL_free(t->ssl);
    free(t);
}

bool tls_is_established(const struct tls_session *t)
{
    return libssl.SSL_is_init_finished(t->ssl);
}

int tls_feed(struct tls_session *t, const void *data, size_t n)
{
    /* a memory BIO only fails to grow */
    return BIO_write(t->rbio, data, (int)n) == (int)n ? 0 : -ENOMEM;
}

long tls_read(struct tls_session *t, void *out, size_t cap)
{
    int r = libssl.SSL_read(t->ssl, out, (int)cap);
    if (r > 0) return r;
    int e = libssl.SSL_get_error(t->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return 0;
    ERR_clear_error();
    return e == SSL_ERROR_ZERO_RETURN ? -ESHUTDOWN /* the peer's close_notify */
                                      : -EPROTO;
}

int tls_write(struct tls_session *t, const void *data, size_t n)
{
    size_t done = 0;
    while (done < n) {
        int r = libssl.SSL_write(t->ssl, (const char *)data + done, (int)(n - done));
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
