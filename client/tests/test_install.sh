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
cc -std=c17 -Wall -Wpedantic -Werror $extra -o "$tmp/user" "$tmp/user.c" $(pkg-config --cflags --libs libexecclient)
LD_LIBRARY_PATH=$(dirname "$(dirname "$pc")") "$tmp/user"

# The whole package: the daemon (its spawner and sandbox helpers are itself), man
# pages, the three systemd units.
p=$tmp/prefix
for f in bin/exec-server; do
    test -x "$p/$f" || { echo "$f not installed"; exit 1; }
done
for f in share/man/man1/exec-server.1 share/man/man1/exec-client.1 share/man/man3/execclient.3 \
         lib/systemd/system/exec-server.service lib/systemd/system/exec-server@.service \
         lib/systemd/user/exec-server.service; do
    test -f "$p/$f" || { echo "$f not installed"; exit 1; }
done
# Tab completion for bash, where bash-completion looks for it.
comp=$p/share/bash-completion/completions/exec-client
test -f "$comp" || { echo "bash completion not installed"; exit 1; }
bash -c ". '$comp' && complete -p exec-client" | grep -q '_exec_client exec-client' ||
    { echo "bash completion does not register exec-client"; exit 1; }
# The installed client runs without LD_LIBRARY_PATH (RUNPATH $ORIGIN/../lib...).
"$p/bin/exec-client" --version | grep -q '^exec-client ' || { echo "installed exec-client does not run"; exit 1; }
# The installed server serves the installed client.
"$p/bin/exec-server" --listen ws://127.0.0.1:0 >"$tmp/url" 2>"$tmp/err" &
srv=$!
i=0
while ! grep -q '^ws://' "$tmp/url" && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done  # sleep-ok: poll, 5 s bound
url=$(head -n1 "$tmp/url")
out=$("$p/bin/exec-client" --url "$url" run -- sh -c 'echo installed-ok')
# ...and a sandboxed read (served by its sandbox helper) is answered, not
# refused as unenforceable.
echo sandboxed > "$tmp/sbx.txt"
req='{"id":1,"method":"fs/readFile","params":{"path":"file://'$tmp'/sbx.txt","sandbox":{"permissions":{"type":"managed","file_system":{"type":"restricted","entries":[{"path":{"type":"path","path":"file://'$tmp'"},"access":"read"}]},"network":"restricted"},"windowsSandboxLevel":"disabled"}}}'
sbx=$(echo "$req" | "$p/bin/exec-client" --url "$url" rpc 2>/dev/null)
kill -TERM $srv
wait $srv || true
test "$out" = "installed-ok" || { echo "installed server/client round trip failed: $out"; cat "$tmp/err"; exit 1; }
case "$sbx" in
*'"dataBase64":"c2FuZGJveGVkCg=="'*) ;;
*) echo "the installed server did not run a sandboxed read: $sbx"; exit 1 ;;
esac
# The units are well formed for this prefix (systemd-analyze checks the files and that
# ExecStart exists). The template is checked as an instance for the current user; the
# user unit as a plain unit (checking it under --user needs a running user manager).
if command -v systemd-analyze >/dev/null 2>&1; then
    me=$(id -un)
    mkdir -p "$tmp/units"
    for u in system/exec-server.service "system/exec-server@.service" user/exec-server.service; do
        name=$(basename "$u")
        case "$u" in
        system/exec-server@.service) name="exec-server@$me.service" ;;
        user/*) name=exec-server-user.service ;;
        esac
        sed "s#^ExecStart=[^ ]*#ExecStart=$p/bin/exec-server#" "$p/lib/systemd/$u" >"$tmp/units/$name"
        grep -q "^ExecStart=$p/bin/exec-server " "$tmp/units/$name" || { echo "$u: no ExecStart"; exit 1; }
        grep -q '^ExecReload=' "$tmp/units/$name" || { echo "$u: no ExecReload"; exit 1; }
        # stdout (the URL line) may go nowhere, but then stderr must be named: its
        # default, inherit, would follow stdout into /dev/null with every log line.
        if grep -q '^StandardOutput=null' "$tmp/units/$name"; then
            grep -q '^StandardError=journal' "$tmp/units/$name" || { echo "$u: logs lost"; exit 1; }
        fi
        if ! systemd-analyze verify --man=no "$tmp/units/$name" >"$tmp/verify" 2>&1; then
            # In a container without a running systemd, verify may fail for reasons
            # unrelated to the unit; only our unit's own errors count.
            if grep -q "$name" "$tmp/verify"; then
                cat "$tmp/verify"; exit 1
            fi
        fi
        if grep -q "$name" "$tmp/verify"; then cat "$tmp/verify"; exit 1; fi
    done
    grep -q '^User=%i' "$p/lib/systemd/system/exec-server@.service" || { echo "template without User=%i"; exit 1; }
fi
echo "install ok"
