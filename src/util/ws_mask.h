/* ws_mask: RFC 6455 payload masking (XOR with a 4-byte key, key offset 0), in
 * place, eight bytes at a time. The same operation masks (a client sending) and
 * unmasks (a server receiving); the server's frame splitter and the remote-mode
 * rendezvous client share it. Pure function, no I/O. */
#ifndef EXEC_UTIL_WS_MASK_H
#define EXEC_UTIL_WS_MASK_H

#include <stddef.h>
#include <stdint.h>

void ws_mask(uint8_t *p, size_t n, const uint8_t key[4]);

#endif
