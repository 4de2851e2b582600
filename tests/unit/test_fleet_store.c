/* Unit tests for fleet/fleet_store on a SQLite file in a temp dir: migrations (once,
 * and a newer schema refused), token checks by verdict, registrations superseding
 * each other, attach/locate/detach, single-use bundles with their limit, and the
 * heartbeat's reconciliation (rows of other nodes, dead nodes, revoked tokens). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fleet/fleet_store.h"

static char dir[64];
static struct fleet_db *db;
static char err[512];

static int setup(void **state)
{
    snprintf(dir, sizeof dir, "/tmp/fleet-store-XXXXXX");
    if (!mkdtemp(dir)) return -1;
    char url[128];
    snprintf(url, sizeof url, "sqlite:%s/t.db", dir);
    if (fleet_db_open(url, &db, err, sizeof err) < 0) return -1;
    return fleet_store_migrate(db, err, sizeof err);
}

static int teardown(void **state)
{
    fleet_db_close(db);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_migrations(void **state)
{
    int64_t v = 0;
    assert_int_equal(fleet_store_migrate(db, err, sizeof err), 0); /* again: nothing to do */
    assert_int_equal(fleet_store_version(db, &v, err, sizeof err), 0);
    assert_int_equal(v, FLEET_SCHEMA_VERSION);
    uint8_t s1[FLEET_SECRET_LEN], s2[FLEET_SECRET_LEN];
    assert_int_equal(fleet_store_secret(db, s1, err, sizeof err), 0);
    assert_int_equal(fleet_store_migrate(db, err, sizeof err), 0);
    assert_int_equal(fleet_store_secret(db, s2, err, sizeof err), 0);
    assert_memory_equal(s1, s2, sizeof s1); /* made once */
    assert_int_equal(fleet_db_exec(db, "INSERT INTO fleet_schema VALUES (99, 'future', 0)", NULL, 0,
                                   NULL, err, sizeof err),
                     0);
    assert_int_equal(fleet_store_migrate(db, err, sizeof err), -EPROTO);
    assert_non_null(strstr(err, "newer"));
    assert_int_equal(fleet_db_exec(db, "DELETE FROM fleet_schema WHERE version = 99", NULL, 0, NULL,
                                   err, sizeof err),
                     0);
}

static enum fleet_token_verdict check(const char *tok, enum fleet_role role, const char *env,
                                      int64_t now)
{
    enum fleet_token_verdict v;
    char id[FLEET_TOKEN_ID_LEN + 1];
    assert_int_equal(
        fleet_store_token_check(db, tok, strlen(tok), role, env, now, &v, id, err, sizeof err), 0);
    return v;
}

static void test_tokens(void **state)
{
    char ex[FLEET_TOKEN_LEN + 1], ci[FLEET_TOKEN_LEN + 1], short_lived[FLEET_TOKEN_LEN + 1];
    assert_int_equal(
        fleet_store_token_create(db, "dev", FLEET_ROLE_EXECUTOR, 0, 1000, ex, err, sizeof err), 0);
    assert_int_equal(
        fleet_store_token_create(db, "ci-*", FLEET_ROLE_HARNESS, 0, 1000, ci, err, sizeof err), 0);
    assert_int_equal(fleet_store_token_create(db, "dev", FLEET_ROLE_HARNESS, 2000, 1000,
                                              short_lived, err, sizeof err),
                     0);
    assert_int_equal(check(ex, FLEET_ROLE_EXECUTOR, "dev", 1500), FLEET_TOKEN_OK);
    assert_int_equal(check(ex, FLEET_ROLE_HARNESS, "dev", 1500), FLEET_TOKEN_WRONG_ROLE);
    assert_int_equal(check(ex, FLEET_ROLE_EXECUTOR, "prod", 1500), FLEET_TOKEN_WRONG_ENV);
    assert_int_equal(check(ci, FLEET_ROLE_HARNESS, "ci-42", 1500), FLEET_TOKEN_OK);
    assert_int_equal(check(ci, FLEET_ROLE_HARNESS, "dev", 1500), FLEET_TOKEN_WRONG_ENV);
    assert_int_equal(check(short_lived, FLEET_ROLE_HARNESS, "dev", 1999), FLEET_TOKEN_OK);
    assert_int_equal(check(short_lived, FLEET_ROLE_HARNESS, "dev", 2001), FLEET_TOKEN_EXPIRED);
    assert_int_equal(check("exrt_nope", FLEET_ROLE_HARNESS, "dev", 1), FLEET_TOKEN_MALFORMED);
    char forged[FLEET_TOKEN_LEN + 1];
    memcpy(forged, ex, sizeof forged);
    forged[FLEET_TOKEN_LEN - 1] = forged[FLEET_TOKEN_LEN - 1] == 'a' ? 'b' : 'a';
    assert_int_equal(check(forged, FLEET_ROLE_EXECUTOR, "dev", 1500), FLEET_TOKEN_UNKNOWN);
    char id[FLEET_TOKEN_ID_LEN + 1];
    memcpy(id, ex + 5, FLEET_TOKEN_ID_LEN);
    id[FLEET_TOKEN_ID_LEN] = '\0';
    assert_int_equal(fleet_store_token_revoke(db, id, 1600, err, sizeof err), 0);
    assert_int_equal(check(ex, FLEET_ROLE_EXECUTOR, "dev", 1700), FLEET_TOKEN_REVOKED);
    assert_int_equal(fleet_store_token_revoke(db, "0000000000000000", 1, err, sizeof err), -ENOENT);
}

static void test_registrations_and_bundles(void **state)
{
    char tok[FLEET_TOKEN_LEN + 1], id[FLEET_TOKEN_ID_LEN + 1];
    assert_int_equal(
        fleet_store_token_create(db, "e-*", FLEET_ROLE_EXECUTOR, 0, 1, tok, err, sizeof err), 0);
    memcpy(id, tok + 5, FLEET_TOKEN_ID_LEN);
    id[FLEET_TOKEN_ID_LEN] = '\0';
    assert_int_equal(fleet_store_register(db, "e-1", "r1", id, "{}", 2, 10, err, sizeof err), 0);
    assert_int_equal(fleet_store_register(db, "e-2", "r2", id, "{}", 2, 10, err, sizeof err), 0);
    assert_int_equal(fleet_store_register(db, "e-3", "r3", id, "{}", 2, 10, err, sizeof err),
                     -EDQUOT);
    assert_int_equal(
        fleet_store_register(db, "e-1", "r1b", id, "{\"k\":1}", 2, 11, err, sizeof err),
        0); /* re-registering an environment it has is fine */
    assert_int_equal(fleet_store_attach(db, "e-1", "r1", "n1", 20, err, sizeof err), -ESTALE);
    struct fleet_location loc;
    assert_int_equal(fleet_store_locate(db, "e-1", 0, &loc, err, sizeof err), -ENOENT);
    /* node n1 is alive; e-1 attached there */
    char **lost;
    size_t nlost;
    assert_int_equal(fleet_store_heartbeat(db, "n1", "http://n1", NULL, 0, 0, 30, &lost, &nlost,
                                           err, sizeof err),
                     0);
    assert_int_equal(fleet_store_attach(db, "e-1", "r1b", "n1", 30, err, sizeof err), 0);
    assert_int_equal(fleet_store_locate(db, "e-1", 25, &loc, err, sizeof err), 0);
    assert_string_equal(loc.node_url, "http://n1");
    assert_string_equal(loc.registration, "r1b");
    assert_string_equal(loc.key_json, "{\"k\":1}");
    fleet_location_clear(&loc);
    /* a stale heartbeat makes it offline */
    assert_int_equal(fleet_store_locate(db, "e-1", 31, &loc, err, sizeof err), -ENOENT);
    /* bundles: single use, limited, expiring */
    assert_int_equal(fleet_store_bundle_add(db, "b1", "e-1", 100, 2, 30, err, sizeof err), 0);
    assert_int_equal(fleet_store_bundle_add(db, "b2", "e-1", 100, 2, 30, err, sizeof err), 0);
    assert_int_equal(fleet_store_bundle_add(db, "b3", "e-1", 100, 2, 30, err, sizeof err), -EDQUOT);
    assert_int_equal(fleet_store_bundle_take(db, "b1", "e-2", 40, err, sizeof err), -ENOENT);
    assert_int_equal(fleet_store_bundle_take(db, "b1", "e-1", 40, err, sizeof err), 0);
    assert_int_equal(fleet_store_bundle_take(db, "b1", "e-1", 41, err, sizeof err), -ENOENT);
    assert_int_equal(fleet_store_bundle_take(db, "b2", "e-1", 101, err, sizeof err), -ENOENT);
    /* heartbeat: n1 still holds e-1 with 3 streams; n2 takes it over; n1 loses it */
    struct fleet_held held = {"e-1", "r1b", 3, true};
    assert_int_equal(fleet_store_heartbeat(db, "n1", "http://n1", &held, 1, 0, 50, &lost, &nlost,
                                           err, sizeof err),
                     0);
    assert_int_equal(nlost, 0);
    assert_int_equal(fleet_store_heartbeat(db, "n2", "http://n2", NULL, 0, 0, 50, &lost, &nlost,
                                           err, sizeof err),
                     0);
    assert_int_equal(fleet_store_attach(db, "e-1", "r1b", "n2", 55, err, sizeof err), 0);
    assert_int_equal(fleet_store_heartbeat(db, "n1", "http://n1", &held, 1, 0, 60, &lost, &nlost,
                                           err, sizeof err),
                     0);
    assert_int_equal(nlost, 1);
    assert_string_equal(lost[0], "e-1");
    free(lost[0]);
    free(lost);
    /* revoking the registering token: its environment is lost by its holder */
    assert_int_equal(fleet_store_token_revoke(db, id, 70, err, sizeof err), 0);
    struct fleet_held held2 = {"e-1", "r1b", 3, false};
    assert_int_equal(fleet_store_heartbeat(db, "n2", "http://n2", &held2, 1, 0, 80, &lost, &nlost,
                                           err, sizeof err),
                     0);
    assert_int_equal(nlost, 1);
    free(lost[0]);
    free(lost);
    assert_int_equal(fleet_store_registration_check(db, "e-1", "r1b", 90, err, sizeof err),
                     -EKEYREVOKED);
}

/* A password never reaches a message: user:PASSWORD@ and password=PASSWORD become ***. */
static void test_url_redact(void **state)
{
    (void)state;
    char out[128];
    assert_true(fleet_db_url_redact("postgresql://registry:s3cret@db/fleet", out, sizeof out));
    assert_string_equal(out, "postgresql://registry:***@db/fleet");
    assert_true(fleet_db_url_redact("postgres://u@db/f?sslmode=require&password=p%40ss&x=1", out,
                                    sizeof out));
    assert_string_equal(out, "postgres://u@db/f?sslmode=require&password=***&x=1");
    assert_true(fleet_db_url_redact("postgresql://u:a@b/f?password=c", out, sizeof out));
    assert_string_equal(out, "postgresql://u:***@b/f?password=***");
    assert_false(fleet_db_url_redact("postgresql://registry@db/fleet?user=x", out, sizeof out));
    assert_string_equal(out, "postgresql://registry@db/fleet?user=x");
    assert_false(fleet_db_url_redact("postgresql:///fleet?host=/run/pg:x", out, sizeof out));
    assert_false(fleet_db_url_redact("sqlite:/tmp/a:b@c", out, sizeof out));
    assert_string_equal(out, "sqlite:/tmp/a:b@c");
    char small[24]; /* cut, never past its end */
    assert_true(fleet_db_url_redact("postgresql://u:pw@db/fleet", small, sizeof small));
    assert_string_equal(small, "postgresql://u:***@db/f");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_migrations),
        cmocka_unit_test(test_tokens),
        cmocka_unit_test(test_registrations_and_bundles),
        cmocka_unit_test(test_url_redact),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
