/* placeholders: reference-counted mount-point directories (see placeholders.h). */
#include "sandbox/placeholders.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/sandbox_host.h"
#include "sandbox/view.h"
#include "util/mem.h"

/* One directory this server created, with its number of users. */
struct ph_entry {
    struct ph_entry *next;
    char *path;
    unsigned users;
};

struct sb_placeholders {
    size_t n;
    struct ph_entry *e[]; /* the entries this use holds */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct ph_entry *entries;

/* mkdir (make) or rmdir of path's last component, in its directory opened with no
 * link on the way: a sandbox that can write the workspace's parent could otherwise
 * swap a component for a link between the policy's resolution and this, and have this
 * server (root, often) make or remove a directory wherever the link points. Returns 0
 * or -1 with errno set. */
static int at_exact(const char *path, bool make)
{
    const char *slash = strrchr(path, '/');
    if (!slash || !slash[1]) {
        errno = EINVAL;
        return -1;
    }
    char *dir = slash == path ? xstrdup("/") : xstrndup(path, (size_t)(slash - path));
    int dfd = sandbox_open_exact(dir, O_DIRECTORY);
    free(dir);
    if (dfd < 0) {
        errno = -dfd;
        return -1;
    }
    int rc = make ? mkdirat(dfd, slash + 1, 0755) : unlinkat(dfd, slash + 1, AT_REMOVEDIR);
    int err = errno;
    close(dfd);
    errno = err;
    return rc;
}

struct sb_placeholders *sandbox_placeholders_acquire(const struct sb_paths *paths)
{
    if (!paths->n) return NULL;
    struct sb_placeholders *h = xcalloc(1, sizeof *h + paths->n * sizeof h->e[0]);
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < paths->n; i++) {
        struct ph_entry *e = entries;
        while (e && strcmp(e->path, paths->v[i]))
            e = e->next;
        if (!e) {
            /* Existing and not ours (EEXIST: the user's, or another program's): never
             * ours to remove. Any other failure: the setup makes it or fails closed. */
            if (at_exact(paths->v[i], true) < 0) continue;
            e = xcalloc(1, sizeof *e);
            e->path = xstrdup(paths->v[i]);
            e->next = entries;
            entries = e;
        }
        e->users++;
        h->e[h->n++] = e;
    }
    pthread_mutex_unlock(&lock);
    if (!h->n) {
        free(h);
        return NULL;
    }
    return h;
}

void sandbox_placeholders_release(struct sb_placeholders *h)
{
    if (!h) return;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < h->n; i++) {
        struct ph_entry *e = h->e[i];
        /* Without a PID namespace a process that left the command's group may outlive
         * the init and its reaping: such a placeholder stays (registered) for good. */
        if (--e->users || sandbox_pid_namespace_inherit) continue;
        at_exact(e->path, false); /* fails harmlessly once something was put inside */
        for (struct ph_entry **pp = &entries; *pp; pp = &(*pp)->next) {
            if (*pp == e) {
                *pp = e->next;
                break;
            }
        }
        free(e->path);
        free(e);
    }
    pthread_mutex_unlock(&lock);
    free(h);
}
