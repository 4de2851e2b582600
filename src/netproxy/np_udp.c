/* np_udp: SOCKS5 UDP ASSOCIATE (placeholder until built). */
#include "netproxy/np_internal.h"

void np_udp_start(struct np_client *c, const struct np_socks_addr *client_addr)
{
    (void)client_addr;
    uint8_t r[32];
    size_t n = np_socks_reply(r, NP_SOCKS_CMD_UNSUPPORTED, NULL);
    np_write_copy(c, false, r, n);
    np_finish(c);
}
void np_udp_close(struct np_client *c) { (void)c; }
