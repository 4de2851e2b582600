/* np_mitm: TLS interception for credential masking (and for limited mode's method
 * check on HTTPS when masking is on).
 *
 * The CA is made once per install and kept in $CODEX_HOME/proxy (default
 * ~/.codex/proxy; the reference keeps its own there too, under other names):
 * exec-server-mitm-ca.pem and exec-server-mitm-ca.key (0600, the directory 0700).
 * The child trusts it through a bundle, the server's own trust store (SSL_CERT_FILE,
 * else the Debian bundle) followed by the CA, written once per content as
 * exec-server-ca-bundle-<hash>.pem and named by the CA variables of PROTOCOL.md 8.3.
 * All of that is read or written once per server, on the first process that asks for
 * masking (a few hundred kilobytes of local files, like the reference does).
 *
 * A CONNECT is intercepted when its destination is one a masked secret may go to,
 * or always in limited mode: the proxy answers the TLS handshake itself with a leaf
 * certificate for the host (P-256, signed by the CA, cached per host), opens its own
 * TLS session to the real server (verified against the server's trust store, name
 * checked); the one HTTP/1.1 request inside is handled like a forwarded one by the
 * relay (np_relay.c: the method guard, the credential header, "Connection: close").
 * This file holds no socket: the relay feeds it each side's ciphertext and gets the
 * plaintext back, hands it plaintext to send, and writes what the sessions have for
 * their sockets (np_mitm_take). libssl comes through transport/tls (dlopen'ed
 * there); the certificates are libcrypto, which is linked. */
#include "netproxy/np_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/env_vars.h"
#include "core/host_env.h"
#include "core/log.h"
#include "transport/tls.h"
#include "util/mem.h"

#define LEAF_CACHE 64

struct np_mitm {
    bool tried;
    int err;
    char why[4400];
    X509 *ca;
    EVP_PKEY *ca_key;
    EVP_PKEY *leaf_key; /* one key for every leaf (fresh per server run) */
    char *bundle;
    struct {
        char host[NP_HOST_MAX];
        X509 *cert;
    } cache[LEAF_CACHE];
    size_t next;
};
static struct np_mitm state;

struct np_mitm_conn {
    struct tls_session *down, *up;
    struct buf pend_up; /* plaintext for the server, waiting for its handshake */
    bool up_ready;
};

/* ---------------------------------------------------------------------------------- */
/* Files */

static char *read_file(const char *path, size_t *len)
{
    *len = 0; /* defined on every path: the callers free and wipe by it */
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    struct buf b;
    buf_init(&b);
    char tmp[65536];
    size_t n;
    while ((n = fread(tmp, 1, sizeof tmp, f)) > 0)
        buf_append(&b, tmp, n);
    fclose(f);
    *len = b.len;
    buf_putc(&b, '\0');
    return buf_steal(&b);
}

/* Writes path atomically (a temporary name, then rename) with mode. */
static int write_file(const char *path, const void *data, size_t len, mode_t mode)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0) return -errno;
    const char *p = data;
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0) {
            int e = errno;
            close(fd);
            unlink(tmp);
            return -e;
        }
        p += w;
        len -= (size_t)w;
    }
    if (fsync(fd) < 0 || close(fd) < 0 || rename(tmp, path) < 0) {
        int e = errno;
        unlink(tmp);
        return -e;
    }
    return 0;
}

static char *bio_text(BIO *b, size_t *len)
{
    char *p;
    long n = BIO_get_mem_data(b, &p);
    *len = (size_t)n;
    return xmemdup(p, (size_t)n);
}

/* ---------------------------------------------------------------------------------- */
/* Certificates */

static bool add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (!ext) return false;
    bool ok = X509_add_ext(cert, ext, -1) == 1;
    X509_EXTENSION_free(ext);
    return ok;
}

static bool random_serial(X509 *cert)
{
    BIGNUM *bn = BN_new();
    bool ok = bn && BN_rand(bn, 120, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) == 1 &&
              BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert)) != NULL;
    BN_free(bn);
    return ok;
}

static X509 *new_cert(EVP_PKEY *key, const char *cn, long from_s, long days)
{
    X509 *x = X509_new();
    if (!x || X509_set_version(x, 2) != 1 || !random_serial(x) ||
        !X509_gmtime_adj(X509_getm_notBefore(x), from_s) ||
        !X509_gmtime_adj(X509_getm_notAfter(x), days * 86400L) || X509_set_pubkey(x, key) != 1 ||
        X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_UTF8,
                                   (const unsigned char *)cn, -1, -1, 0) != 1) {
        X509_free(x);
        return NULL;
    }
    return x;
}

static int make_ca(const char *dir, const char *cert_path, const char *key_path)
{
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *x = key ? new_cert(key, "exec-server network proxy MITM CA", -3600, 3650) : NULL;
    if (!x || X509_set_issuer_name(x, X509_get_subject_name(x)) != 1 ||
        !add_ext(x, x, NID_basic_constraints, "critical,CA:TRUE") ||
        !add_ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign,digitalSignature") ||
        !add_ext(x, x, NID_subject_key_identifier, "hash") ||
        X509_sign(x, key, EVP_sha256()) == 0) {
        X509_free(x);
        EVP_PKEY_free(key);
        return -EIO;
    }
    BIO *kb = BIO_new(BIO_s_mem()), *cb = BIO_new(BIO_s_mem());
    PEM_write_bio_PrivateKey(kb, key, NULL, NULL, 0, NULL, NULL);
    PEM_write_bio_X509(cb, x);
    size_t kl, cl;
    char *kt = bio_text(kb, &kl), *ct = bio_text(cb, &cl);
    BIO_free(kb);
    BIO_free(cb);
    (void)dir;
    /* the key first: a certificate without its key would be useless */
    int rc = write_file(key_path, kt, kl, 0600);
    if (rc == 0) rc = write_file(cert_path, ct, cl, 0644);
    explicit_bzero(kt, kl);
    free(kt);
    free(ct);
    state.ca = x;
    state.ca_key = key;
    return rc;
}

static int load_ca(const char *cert_path, const char *key_path)
{
    size_t cl, kl;
    char *ct = read_file(cert_path, &cl), *kt = read_file(key_path, &kl);
    int rc = -ENOENT;
    if (ct && kt) {
        BIO *cb = BIO_new_mem_buf(ct, (int)cl), *kb = BIO_new_mem_buf(kt, (int)kl);
        state.ca = PEM_read_bio_X509(cb, NULL, NULL, NULL);
        state.ca_key = PEM_read_bio_PrivateKey(kb, NULL, NULL, NULL);
        BIO_free(cb);
        BIO_free(kb);
        rc = state.ca && state.ca_key && X509_check_private_key(state.ca, state.ca_key) == 1
                 ? 0
                 : -EINVAL;
    }
    free(ct);
    if (kt) explicit_bzero(kt, kl);
    free(kt);
    ERR_clear_error();
    return rc;
}

/* The child's bundle: the server's trust store, then the CA. */
static int write_bundle(const char *dir)
{
    const char *sys = env_vars.ssl_cert_file;
    if (!sys || !*sys) sys = "/etc/ssl/certs/ca-certificates.crt";
    size_t sl = 0;
    char *roots = read_file(sys, &sl);
    struct buf b;
    buf_init(&b);
    if (roots) {
        buf_append(&b, roots, sl);
        if (sl && roots[sl - 1] != '\n') buf_putc(&b, '\n');
    }
    free(roots);
    BIO *cb = BIO_new(BIO_s_mem());
    PEM_write_bio_X509(cb, state.ca);
    size_t cl;
    char *ct = bio_text(cb, &cl);
    BIO_free(cb);
    buf_append(&b, ct, cl);
    free(ct);
    unsigned char md[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)b.data, b.len, md);
    char path[4200];
    int o = snprintf(path, sizeof path, "%s/exec-server-ca-bundle-", dir);
    for (int i = 0; i < 8; i++)
        o += snprintf(path + o, sizeof path - (size_t)o, "%02x", md[i]);
    snprintf(path + o, sizeof path - (size_t)o, ".pem");
    struct stat st;
    int rc = stat(path, &st) == 0 && (size_t)st.st_size == b.len
                 ? 0
                 : write_file(path, b.data, b.len, 0644);
    buf_free(&b);
    if (rc == 0) state.bundle = xstrdup(path);
    return rc;
}

static void load_once(void)
{
    if (state.tried) return;
    state.tried = true;
    const char *codex_home = env_vars.codex_home;
    char dir[4096], home[4000];
    /* Never a shared directory such as /tmp when no home is known: another local user
     * could plant the CA there or read its key. */
    if (codex_home && *codex_home)
        snprintf(dir, sizeof dir, "%s/proxy", codex_home);
    else if (host_env_home(home, sizeof home) && strcmp(home, "/") != 0)
        snprintf(dir, sizeof dir, "%s/.codex/proxy", home);
    else {
        state.err = -ENOENT;
        snprintf(state.why, sizeof state.why,
                 "credential masking: no home directory for the interception CA (set HOME or "
                 "CODEX_HOME)");
        log_warn("%s", state.why);
        return;
    }
    char parent[4096];
    snprintf(parent, sizeof parent, "%s", dir);
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent) {
        *slash = '\0';
        mkdir(parent, 0700);
    }
    mkdir(dir, 0700);
    char cert[4200], key[4200];
    snprintf(cert, sizeof cert, "%s/exec-server-mitm-ca.pem", dir);
    snprintf(key, sizeof key, "%s/exec-server-mitm-ca.key", dir);
    int rc = load_ca(cert, key);
    if (rc == -ENOENT) {
        X509_free(state.ca);
        EVP_PKEY_free(state.ca_key);
        state.ca = NULL;
        state.ca_key = NULL;
        rc = make_ca(dir, cert, key);
        if (rc == 0) log_info("network proxy: made the MITM CA %s", cert);
    }
    if (rc == 0) rc = write_bundle(dir);
    if (rc == 0) {
        state.leaf_key = EVP_EC_gen("P-256");
        if (!state.leaf_key) rc = -EIO;
    }
    if (rc < 0) {
        state.err = rc;
        snprintf(state.why, sizeof state.why,
                 "credential masking: cannot set up the interception CA in %s: %s", dir,
                 strerror(-rc));
        log_warn("%s", state.why);
    }
    ERR_clear_error();
}

static X509 *leaf_for(const char *host)
{
    for (size_t i = 0; i < LEAF_CACHE; i++)
        if (state.cache[i].cert && strcmp(state.cache[i].host, host) == 0)
            return state.cache[i].cert;
    X509 *x = new_cert(state.leaf_key, host, -3600, 397);
    bool literal = np_host_is_ip_literal(host, NULL);
    char san[NP_HOST_MAX + 8];
    snprintf(san, sizeof san, "%s:%s", literal ? "IP" : "DNS", host);
    if (!x || X509_set_issuer_name(x, X509_get_subject_name(state.ca)) != 1 ||
        !add_ext(x, state.ca, NID_basic_constraints, "critical,CA:FALSE") ||
        !add_ext(x, state.ca, NID_key_usage, "critical,digitalSignature,keyEncipherment") ||
        !add_ext(x, state.ca, NID_ext_key_usage, "serverAuth") ||
        !add_ext(x, state.ca, NID_subject_alt_name, san) ||
        !add_ext(x, state.ca, NID_subject_key_identifier, "hash") ||
        !add_ext(x, state.ca, NID_authority_key_identifier, "keyid:always") ||
        X509_sign(x, state.ca_key, EVP_sha256()) == 0) {
        X509_free(x);
        ERR_clear_error();
        return NULL;
    }
    size_t slot = state.next++ % LEAF_CACHE;
    X509_free(state.cache[slot].cert);
    state.cache[slot].cert = x;
    snprintf(state.cache[slot].host, sizeof state.cache[slot].host, "%s", host);
    return x;
}

/* ---------------------------------------------------------------------------------- */

int np_mitm_init(struct netproxy *np, char *err, size_t n)
{
    load_once();
    if (state.err) {
        snprintf(err, n, "%s", state.why);
        return state.err;
    }
    np->mitm = &state;
    np->ca_bundle = state.bundle;
    return 0;
}

void np_mitm_free(struct netproxy *np)
{
    np->mitm = NULL; /* the CA and the leaves are the server's, kept for the next one */
    np->ca_bundle = NULL;
}

bool np_mitm_active(const struct np_client *c, bool up_side)
{
    (void)up_side;
    return c->mitm != NULL;
}

size_t np_mitm_take(struct np_client *c, bool to_up, char **out)
{
    struct np_mitm_conn *m = c->mitm;
    *out = NULL;
    if (!m) return 0;
    return tls_take_output(to_up ? m->up : m->down, out);
}

int np_mitm_start(struct np_client *c)
{
    char err[400];
    X509 *leaf = leaf_for(c->host);
    if (!leaf) return -EIO;
    struct np_mitm_conn *m = xcalloc(1, sizeof *m);
    buf_init(&m->pend_up);
    m->down = tls_mitm_session_new(leaf, state.leaf_key, err, sizeof err);
    m->up = m->down ? tls_client_session_new(c->host, err, sizeof err) : NULL;
    if (!m->down || !m->up) {
        char hv[NP_HOST_MAX * 2];
        log_warn("network proxy: cannot intercept %s: %s", log_value(c->host, hv, sizeof hv), err);
        tls_session_free(m->down);
        tls_session_free(m->up);
        free(m);
        return -EIO;
    }
    c->mitm = m;
    c->mitm_port = c->port;
    c->mode = c->mode_up = NP_MODE_NONE;
    return 0;
}

int np_mitm_feed(struct np_client *c, bool from_up, const char *data, size_t n, struct buf *plain)
{
    struct np_mitm_conn *m = c->mitm;
    struct tls_session *t = from_up ? m->up : m->down;
    if (tls_feed(t, data, n) < 0) return -EPROTO;
    char chunk[16384];
    for (;;) {
        long r = tls_read(t, chunk, sizeof chunk);
        if (from_up && !m->up_ready && tls_is_established(m->up)) {
            m->up_ready = true;
            if (m->pend_up.len) {
                tls_write(m->up, m->pend_up.data, m->pend_up.len);
                explicit_bzero(m->pend_up.data, m->pend_up.len);
                buf_reset(&m->pend_up);
            }
        }
        if (r > 0) {
            buf_append(plain, chunk, (size_t)r);
            continue;
        }
        if (r == 0 || r == -ESHUTDOWN) return (int)r;
        if (r == -EPROTO) {
            char hv[NP_HOST_MAX * 2];
            log_info("network proxy: TLS with %s for %s failed",
                     from_up ? "the server" : "the client", log_value(c->host, hv, sizeof hv));
        }
        return r < 0 ? (int)r : -EIO;
    }
}

int np_mitm_send(struct np_client *c, bool to_up, const void *data, size_t n)
{
    struct np_mitm_conn *m = c->mitm;
    if (!m || c->closed) return 0;
    if (to_up && !m->up_ready) {
        buf_append(&m->pend_up, data, n);
        return 0;
    }
    return tls_write(to_up ? m->up : m->down, data, n) < 0 ? -EIO : 0;
}

void np_mitm_close_notify(struct np_client *c, bool up_side)
{
    if (c->mitm) tls_close_notify(up_side ? c->mitm->up : c->mitm->down);
}

void np_mitm_client_free(struct np_client *c)
{
    struct np_mitm_conn *m = c->mitm;
    if (!m) return;
    tls_session_free(m->down);
    tls_session_free(m->up);
    if (m->pend_up.data) explicit_bzero(m->pend_up.data, m->pend_up.len);
    buf_free(&m->pend_up);
    free(m);
    c->mitm = NULL;
}
