/* Unit tests for session/env_config's TOML filter (environmentConfig/read). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "session/env_config.h"

static const char config[] = "model = \"x\"  # the model\n"
                             "approval_policy = \"never\"\n"
                             "\n"
                             "[mcp_servers.foo]\n"
                             "command = \"foo-cmd\"\n"
                             "args = [\n"
                             "  \"a\",\n"
                             "  \"]\",\n"
                             "]\n"
                             "note = '''\n"
                             "[not.a.table]\n"
                             "'''\n"
                             "\n"
                             "[mcp_servers.bar]\n"
                             "url = \"http://h/#frag\" # trailing\n"
                             "[other]\n"
                             "k = 1\n"
                             "j = 2\n"
                             "[[servers]]\n"
                             "name = \"s1\"\n";

static void expect(const char *paths_json, const char *want)
{
    json_error_t e;
    json_t *paths = json_loads(paths_json, 0, &e);
    assert_non_null(paths);
    char *got = env_config_filter(config, strlen(config), paths);
    assert_string_equal(got, want);
    free(got);
    json_decref(paths);
}

static void filters(void **state)
{
    (void)state;
    expect("[[\"model\"]]", "model = \"x\"\n");
    expect("[[\"model\"],[\"other\",\"k\"]]", "model = \"x\"\n\n[other]\nk = 1\n");
    expect("[[\"mcp_servers\",\"bar\"]]", "[mcp_servers.bar]\nurl = \"http://h/#frag\"\n");
    expect("[[\"mcp_servers\",\"foo\",\"args\"]]",
           "[mcp_servers.foo]\nargs = [\n  \"a\",\n  \"]\",\n]\n");
    expect("[[\"mcp_servers\",\"foo\",\"note\"]]",
           "[mcp_servers.foo]\nnote = '''\n[not.a.table]\n'''\n");
    expect("[[\"servers\"]]", "[[servers]]\nname = \"s1\"\n");
    expect("[[\"nothing\"]]", "");
    expect("[]", "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(filters)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
