/* mlkem768-cli: our ML-KEM-768 (src/crypto/mlkem768) behind a line protocol on stdin/stdout,
 * so tests/blackbox/test_mlkem_oracle.py can cross-check it against the JavaScript oracle
 * (tests/oracle/mlkem_oracle.mjs speaks the same protocol). Test tool only, never installed.
 *
 * Requests, one per line, byte strings in lowercase hex:
 *   keygen [d z]        -> "ok EK DK"     (random seeds when none are given)
 *   encaps EK [m]       -> "ok CT SS"     (random m when none is given)
 *   decaps CT DK        -> "ok SS"
 * Errors answer "err CODE" with the negative return code, or "err parse" for a bad line.
 *
 * `mlkem768-cli bench [N]` instead times N rounds of keygen, encaps and decaps and prints
 * microseconds per operation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crypto/mlkem768.h"

/* Decodes exactly want bytes of hex from tok; 0 on success. */
static int unhex(const char *tok, uint8_t *out, size_t want)
{
    if (!tok || strlen(tok) != 2 * want) return -1;
    for (size_t i = 0; i < want; i++) {
        unsigned v;
        if (sscanf(tok + 2 * i, "%2x", &v) != 1) return -1;
        out[i] = (uint8_t)v;
    }
    return 0;
}

static void puthex(const uint8_t *p, size_t n)
{
    putchar(' ');
    for (size_t i = 0; i < n; i++)
        printf("%02x", p[i]);
}

static void serve_line(char *line)
{
    static uint8_t ek[MLKEM768_EK_BYTES], dk[MLKEM768_DK_BYTES], ct[MLKEM768_CT_BYTES];
    uint8_t ss[MLKEM768_SS_BYTES], s1[MLKEM768_SEED_BYTES], s2[MLKEM768_SEED_BYTES];
    const char *cmd = strtok(line, " \n"), *a = strtok(NULL, " \n"), *b = strtok(NULL, " \n");
    int rc;
    if (!cmd) return;
    if (strcmp(cmd, "keygen") == 0 && !a) {
        rc = mlkem768_keypair(ek, dk);
    } else if (strcmp(cmd, "keygen") == 0) {
        if (unhex(a, s1, sizeof s1) || unhex(b, s2, sizeof s2)) goto parse;
        rc = mlkem768_keypair_derand(ek, dk, s1, s2);
    } else if (strcmp(cmd, "encaps") == 0) {
        if (unhex(a, ek, sizeof ek) || (b && unhex(b, s1, sizeof s1))) goto parse;
        rc = b ? mlkem768_encaps_derand(ct, ss, ek, s1) : mlkem768_encaps(ct, ss, ek);
    } else if (strcmp(cmd, "decaps") == 0) {
        if (unhex(a, ct, sizeof ct) || unhex(b, dk, sizeof dk)) goto parse;
        rc = mlkem768_decaps(ss, ct, dk);
    } else {
        goto parse;
    }
    if (rc < 0) {
        printf("err %d\n", rc);
    } else {
        printf("ok");
        if (cmd[0] == 'k') {
            puthex(ek, sizeof ek);
            puthex(dk, sizeof dk);
        } else if (cmd[0] == 'e') {
            puthex(ct, sizeof ct);
            puthex(ss, sizeof ss);
        } else {
            puthex(ss, sizeof ss);
        }
        putchar('\n');
    }
    fflush(stdout);
    return;
parse:
    printf("err parse\n");
    fflush(stdout);
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int bench(int n)
{
    static uint8_t ek[MLKEM768_EK_BYTES], dk[MLKEM768_DK_BYTES], ct[MLKEM768_CT_BYTES];
    uint8_t ss1[MLKEM768_SS_BYTES], ss2[MLKEM768_SS_BYTES];
    double t_kg = 0, t_enc = 0, t_dec = 0;
    for (int i = 0; i < n; i++) {
        double t0 = now_us();
        if (mlkem768_keypair(ek, dk) < 0) return 1;
        double t1 = now_us();
        if (mlkem768_encaps(ct, ss1, ek) < 0) return 1;
        double t2 = now_us();
        if (mlkem768_decaps(ss2, ct, dk) < 0 || memcmp(ss1, ss2, sizeof ss1) != 0) return 1;
        double t3 = now_us();
        t_kg += t1 - t0;
        t_enc += t2 - t1;
        t_dec += t3 - t2;
    }
    printf("mlkem768 %d rounds: keygen %.1f us, encaps %.1f us, decaps %.1f us per op\n", n,
           t_kg / n, t_enc / n, t_dec / n);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "bench") == 0)
        return bench(argc >= 3 ? atoi(argv[2]) > 0 ? atoi(argv[2]) : 1 : 1000);
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, stdin) > 0)
        serve_line(line);
    free(line);
    return 0;
}
