/* relay_err: texts for the relay codecs' error codes (see relay_err.h). */
#include "proto/relay_err.h"

const char *relay_strerror(int err)
{
    switch (err) {
    case RELAY_E_MALFORMED: return "relay frame is not a well-formed RelayMessageFrame";
    case RELAY_E_TOO_BIG: return "relay frame exceeds 256 KiB";
    case RELAY_E_UTF8: return "relay frame string field is not valid UTF-8";
    case RELAY_E_VERSION: return "unsupported relay message frame version";
    case RELAY_E_STREAM_ID: return "relay message frame is missing stream_id";
    case RELAY_E_NO_BODY: return "relay message frame is missing body";
    case RELAY_E_DATA: return "relay data message frame is missing required fields";
    case RELAY_E_RESET: return "relay reset message frame is missing reason";
    case RELAY_E_HANDSHAKE: return "relay handshake message frame is missing payload";
    case RELAY_E_NOSPC: return "relay frame does not fit the output buffer";
    case RELAY_E_REORDER_WINDOW: return "Noise relay ciphertext exceeds reorder window";
    case RELAY_E_REORDER_FULL: return "Noise relay pending ciphertext buffer is full";
    case RELAY_E_SEQ_EXHAUSTED: return "Noise relay sequence number exhausted";
    case RELAY_E_MSG_LEN: return "Noise relay JSON-RPC message has invalid length";
    case RELAY_E_RECORD_LEN: return "Noise relay plaintext record exceeds maximum length";
    default: return "unknown relay error";
    }
}
