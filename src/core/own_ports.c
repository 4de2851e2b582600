/* own_ports: the server's listening ports in a shared table (see own_ports.h). */
#include "core/own_ports.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#define NPORTS 65536

static uint8_t *table; /* NPORTS counts, shared; NULL until init or attach */
static int table_fd = -1;

int own_ports_init(void)
{
    if (table) return 0;
    int fd = memfd_create("exec-server-ports", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return -errno;
    /* Sealed at its size: a reader's mapping can never be cut short under it. */
    if (ftruncate(fd, NPORTS) < 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    void *p = mmap(NULL, NPORTS, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        close(fd);
        return -e;
    }
    table = p;
    table_fd = fd;
    return 0;
}

int own_ports_fd(void)
{
    return table_fd;
}

int own_ports_attach(int fd)
{
    void *p = mmap(NULL, NPORTS, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return -errno;
    table = p;
    return 0;
}

bool own_ports_ready(void)
{
    return table != NULL;
}

void own_ports_add(uint16_t port)
{
    if (table && port) __atomic_add_fetch(&table[port], 1, __ATOMIC_SEQ_CST);
}

void own_ports_remove(uint16_t port)
{
    if (table && port && __atomic_load_n(&table[port], __ATOMIC_SEQ_CST))
        __atomic_sub_fetch(&table[port], 1, __ATOMIC_SEQ_CST);
}

bool own_ports_has(uint16_t port)
{
    return table && __atomic_load_n(&table[port], __ATOMIC_SEQ_CST) != 0;
}
