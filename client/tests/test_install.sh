#!/bin/sh
# Installs the build into a scratch prefix and builds a small program against the
# installed header, library and pkg-config file, the way a user of libexecclient would.
# usage: test_install.sh BUILD_DIR EXTRA_CFLAGS
set -eu
build=$1
extra=${2:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
pc=$(find "$tmp/prefix" -name libexecclient.pc)
test -n "$pc" || { echo "libexecclient.pc not installed"; exit 1; }
test -f "$tmp/prefix/include/execclient.h" || { echo "header not installed"; exit 1; }
test -x "$tmp/prefix/bin/exec-client" || { echo "exec-client not installed"; exit 1; }
cat > "$tmp/user.c" <<'C'
#include <execclient.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(void)
{
    char *uri = ec_path_to_uri("/tmp/a b");
    ec_client *c = NULL;
    ec_error e;
    ec_client_options o = {.url = "http://nope"};
    int rc = ec_client_connect(&o, &c, &e);
    int ok = uri && strcmp(uri, "file:///tmp/a%20b") == 0 && rc == -EC_ERR_USAGE &&
             e.kind == EC_ERR_USAGE && c == NULL;
    free(uri);
    puts(ok ? "ok" : "bad");
    return ok ? 0 : 1;
}
C
export PKG_CONFIG_PATH=$(dirname "$pc")
# shellcheck disable=SC2046,SC2086
cc -std=c17 -Wall -Werror $extra -o "$tmp/user" "$tmp/user.c" $(pkg-config --cflags --libs libexecclient)
LD_LIBRARY_PATH=$(dirname "$(dirname "$pc")") "$tmp/user"
