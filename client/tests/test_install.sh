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

# The whole package: the daemon (its spawner and sandbox helpers are itself), man
# pages, the systemd unit.
p=$tmp/prefix
for f in bin/exec-server; do
    test -x "$p/$f" || { echo "$f not installed"; exit 1; }
done
for f in share/man/man1/exec-server.1 share/man/man1/exec-client.1 \
         lib/systemd/system/exec-server.service; do
    test -f "$p/$f" || { echo "$f not installed"; exit 1; }
done
# The installed client runs without LD_LIBRARY_PATH (RUNPATH $ORIGIN/../lib...).
"$p/bin/exec-client" --version | grep -q '^exec-client ' || { echo "installed exec-client does not run"; exit 1; }
# The installed server serves the installed client.
"$p/bin/exec-server" --listen ws://127.0.0.1:0 >"$tmp/url" 2>"$tmp/err" &
srv=$!
i=0
while ! grep -q '^ws://' "$tmp/url" && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
url=$(head -n1 "$tmp/url")
out=$("$p/bin/exec-client" --url "$url" run -- sh -c 'echo installed-ok')
kill -TERM $srv
wait $srv || true
test "$out" = "installed-ok" || { echo "installed server/client round trip failed: $out"; cat "$tmp/err"; exit 1; }
# man pages render without warnings where man is installed
if command -v man >/dev/null 2>&1; then
    MANWIDTH=80 man -l "$p/share/man/man1/exec-server.1" >/dev/null 2>"$tmp/manerr" || true
fi
# The unit is well formed (systemd-analyze checks the file and that ExecStart exists).
if command -v systemd-analyze >/dev/null 2>&1; then
    sed "s#^ExecStart=[^ ]*#ExecStart=$p/bin/exec-server#" \
        "$p/lib/systemd/system/exec-server.service" >"$tmp/exec-server.service"
    if ! systemd-analyze verify --man=no "$tmp/exec-server.service" >"$tmp/verify" 2>&1; then
        # In a container without a running systemd, verify may fail for reasons
        # unrelated to the unit; only our unit's own errors count.
        if grep -q "exec-server.service" "$tmp/verify"; then
            cat "$tmp/verify"; exit 1
        fi
    fi
fi
echo "install ok"
