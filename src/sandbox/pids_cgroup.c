/* pids_cgroup: a pids cgroup per sandbox (see pids_cgroup.h). */
#include "sandbox/pids_cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/mem.h"

static char base[PATH_MAX]; /* this server's directory; empty when unavailable */
static unsigned long counter;

/* Our own cgroup path in the hierarchy: v1, the line whose controllers include
 * "pids"; v2, the "0::" line. Returns 0 or -ENOENT. */
static int own_cgroup(bool v2, char *out, size_t n)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f) return -errno;
    char line[PATH_MAX + 64];
    int rc = -ENOENT;
    while (rc && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c2 = 0;
        const char *ctrls = c1 + 1;
        bool match = false;
        if (v2) {
            match = !*ctrls && !strncmp(line, "0", 1);
        } else {
            for (const char *p = ctrls; (p = strstr(p, "pids")) && !match; p += 4)
                match = (p == ctrls || p[-1] == ',') && (p[4] == 0 || p[4] == ',');
        }
        if (match && strlen(c2 + 1) < n) {
            snprintf(out, n, "%s", c2 + 1);
            rc = 0;
        }
    }
    fclose(f);
    return rc;
}

/* The mount point of the pids hierarchy (v1) or of cgroup2 (v2 set), from mountinfo.
 * Returns 0 or -ENOENT. */
static int hierarchy_mount(bool *v2, char *out, size_t n)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f) return -errno;
    char line[4096], v2path[PATH_MAX] = "";
    int rc = -ENOENT;
    while (rc && fgets(line, sizeof line, f)) {
        /* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS ... - FSTYPE SOURCE SUPEROPTS */
        char *dash = strstr(line, " - ");
        if (!dash) continue;
        char mnt[PATH_MAX], fstype[64], src[256], sopts[1024] = "";
        if (sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1) continue;
        if (sscanf(dash + 3, "%63s %255s %1023s", fstype, src, sopts) < 2) continue;
        if (!strcmp(fstype, "cgroup2") && !v2path[0]) snprintf(v2path, sizeof v2path, "%s", mnt);
        if (strcmp(fstype, "cgroup")) continue;
        for (char *t = strtok(sopts, ","); t; t = strtok(NULL, ","))
            if (!strcmp(t, "pids") && strlen(mnt) < n) {
                snprintf(out, n, "%s", mnt);
                *v2 = false;
                rc = 0;
            }
    }
    fclose(f);
    if (rc && v2path[0] && strlen(v2path) < n) {
        snprintf(out, n, "%s", v2path);
        *v2 = true;
        rc = 0;
    }
    return rc;
}

/* v2 only: whether our cgroup hands "pids" down to the cgroups made in it. */
static bool delegates_pids(const char *dir)
{
    char p[PATH_MAX + 32], buf[512];
    snprintf(p, sizeof p, "%s/cgroup.subtree_control", dir);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    ssize_t r = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (r <= 0) return false;
    buf[r] = 0;
    for (char *t = strtok(buf, " \n"); t; t = strtok(NULL, " \n"))
        if (!strcmp(t, "pids")) return true;
    return false;
}

static int write_text(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    size_t n = strlen(text);
    int rc = write(fd, text, n) == (ssize_t)n ? 0 : -errno;
    close(fd);
    return rc;
}

int pids_cgroup_init(void)
{
    char mnt[PATH_MAX], own[PATH_MAX], dir[PATH_MAX];
    bool v2 = false;
    int rc = hierarchy_mount(&v2, mnt, sizeof mnt);
    if (!rc) rc = own_cgroup(v2, own, sizeof own);
    if (rc) return rc;
    if (snprintf(dir, sizeof dir, "%s%s", mnt, strcmp(own, "/") ? own : "") >= (int)sizeof dir)
        return -ENAMETOOLONG;
    if (v2 && !delegates_pids(dir)) return -EPERM;
    char mine[PATH_MAX];
    if (snprintf(mine, sizeof mine, "%s/exec-server.%d", dir, (int)getpid()) >= (int)sizeof mine)
        return -ENAMETOOLONG;
    if (mkdir(mine, 0755) < 0 && errno != EEXIST) return -errno;
    /* v2: our directory must hand pids on to each sandbox's cgroup in turn. */
    if (v2 && (rc = write_text(strcat(strcpy(dir, mine), "/cgroup.subtree_control"), "+pids"))) {
        rmdir(mine);
        return rc;
    }
    snprintf(base, sizeof base, "%s", mine);
    return 0;
}

bool pids_cgroup_available(void)
{
    return base[0] != 0;
}

int pids_cgroup_create(unsigned max, struct pids_cgroup *out)
{
    out->path = NULL;
    out->procs_fd = -1;
    if (!base[0]) return -ENOTSUP;
    unsigned long n = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    char *path = xasprintf("%s/s%lu", base, n);
    char file[PATH_MAX + 32], num[32];
    int rc = mkdir(path, 0755) < 0 ? -errno : 0;
    snprintf(num, sizeof num, "%u", max);
    snprintf(file, sizeof file, "%s/pids.max", path);
    if (!rc) rc = write_text(file, num);
    snprintf(file, sizeof file, "%s/cgroup.procs", path);
    int fd = rc ? -1 : open(file, O_WRONLY | O_CLOEXEC);
    if (!rc && fd < 0) rc = -errno;
    if (rc) {
        rmdir(path);
        free(path);
        return rc;
    }
    out->path = path;
    out->procs_fd = fd;
    return 0;
}

void pids_cgroup_remove(struct pids_cgroup *cg)
{
    if (cg->procs_fd >= 0) close(cg->procs_fd);
    cg->procs_fd = -1;
    if (cg->path) rmdir(cg->path);
    free(cg->path);
    cg->path = NULL;
}

int pids_cgroup_move(int procs_fd, pid_t pid)
{
    char num[16];
    int n = 0;
    char rev[16];
    unsigned v = (unsigned)pid;
    do {
        rev[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v && n < (int)sizeof rev);
    for (int i = 0; i < n; i++)
        num[i] = rev[n - 1 - i];
    return write(procs_fd, num, (size_t)n) == n ? 0 : -errno;
}

void pids_cgroup_shutdown(void)
{
    if (base[0]) rmdir(base);
    base[0] = 0;
}
