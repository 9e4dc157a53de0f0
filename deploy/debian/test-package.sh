#!/usr/bin/env bash
# The Debian package as an operator meets it, on this machine (run as root; loopback only; it cleans up
# after itself). It builds the package with cargo-deb (the dist profile), installs it with dpkg, checks
# what it put where, verifies and scores the systemd unit, starts the installed binary by hand as the
# herald user with the installed configuration (there is no systemd as PID 1 here), publishes an event,
# upgrades the package over a changed configuration, and removes it, then checks what stays:
#
#   deploy/debian/test-package.sh [--no-build]    (--no-build: package target/dist/herald as it is)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

BUILD=(--profile dist)
[[ ${1:-} == --no-build ]] && BUILD+=(--no-build)
((EUID == 0)) || { echo "test-package: run as root (it installs a package)" >&2; exit 2; }
command -v cargo-deb >/dev/null || { echo "test-package: needs cargo-deb (cargo install cargo-deb --locked)" >&2; exit 2; }

fail() { echo "test-package: FAIL: $*" >&2; exit 1; }
ok() { echo "test-package: ok: $*"; }

WORK=$(mktemp -d /tmp/herald-package.XXXXXX)
HERALD_PID=
cleanup() {
    if [[ -n $HERALD_PID ]]; then kill "$HERALD_PID" 2>/dev/null || true; wait "$HERALD_PID" 2>/dev/null || true; fi
    dpkg --purge herald >/dev/null 2>&1 || true
    userdel herald >/dev/null 2>&1 || true
    groupdel herald >/dev/null 2>&1 || true
    rm -rf /var/lib/herald /etc/herald "$WORK"
}
trap cleanup EXIT
if dpkg-query -W herald >/dev/null 2>&1 || [[ -e /var/lib/herald || -e /etc/herald ]]; then
    fail "herald is installed already, or /var/lib/herald or /etc/herald exists: this test needs a machine without them"
fi

# --- build -----------------------------------------------------------------------------------
cargo deb -p server "${BUILD[@]}" --output "$WORK/herald.deb"
# The same build one Debian revision later, to upgrade to.
cargo deb -p server --profile dist --no-build --deb-revision 99 --output "$WORK/herald-upgrade.deb" >/dev/null
UPGRADE_VERSION=$(dpkg-deb --field "$WORK/herald-upgrade.deb" Version)
ok "built $(dpkg-deb --field "$WORK/herald.deb" Package Version Depends | tr '\n' ' ')"

# --- install ---------------------------------------------------------------------------------
DEBIAN_FRONTEND=noninteractive dpkg -i "$WORK/herald.deb"
[[ -x /usr/bin/herald ]] || fail "/usr/bin/herald is not installed"
UNIT=$(dpkg -L herald | grep '/systemd/system/herald.service$') || fail "no herald.service in the package"
[[ $(stat -c '%a %U %G' /etc/herald/herald.toml) == "640 root herald" ]] ||
    fail "/etc/herald/herald.toml is $(stat -c '%a %U %G' /etc/herald/herald.toml), not 640 root herald"
[[ $(stat -c '%a %U' /var/lib/herald) == "700 herald" ]] || fail "/var/lib/herald is $(stat -c '%a %U' /var/lib/herald)"
dpkg-query -W -f='${Conffiles}\n' herald | grep -q '/etc/herald/herald.toml' || fail "herald.toml is not a conffile"
[[ -z $(find /var/lib/herald -mindepth 1) ]] || fail "the package put files in /var/lib/herald: $(ls -A /var/lib/herald)"
ok "installed: /usr/bin/herald, $UNIT, /etc/herald/herald.toml (640 root:herald), /var/lib/herald (700 herald, empty)"

# --- the unit --------------------------------------------------------------------------------
verify=$(systemd-analyze verify "$UNIT" 2>&1) || fail "systemd-analyze verify: $verify"
[[ -z $verify ]] || fail "systemd-analyze verify is not clean: $verify"
exposure=$(systemd-analyze security --offline=yes "$UNIT" 2>&1 | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
[[ -n $exposure ]] || fail "systemd-analyze security printed no exposure"
python3 -c "import sys; sys.exit(0 if float('$exposure') <= 2.0 else 1)" || fail "the unit's exposure is $exposure, above 2.0"
ok "the unit verifies, exposure $exposure"

# --- a bad configuration stops the start, naming the key --------------------------------------
bad_start() { # FILE WORD: the start must fail and its message must name WORD
    local out
    if out=$(runuser -u herald -- /usr/bin/herald serve --config "$1" 2>&1); then fail "started with $1"; fi
    grep -q "$2" <<<"$out" || fail "the message for $1 does not name $2: $out"
}
cp /etc/herald/herald.toml "$WORK/unknown.toml"
echo 'listen_port = 9000' >>"$WORK/unknown.toml"
sed 's/^fresh_concurrency = 256/fresh_concurrency = 0/' /etc/herald/herald.toml >"$WORK/bad-value.toml"
sed 's/^sqlite_synchronous = "full"/sqlite_synchronous = "sometimes"/' /etc/herald/herald.toml >"$WORK/bad-enum.toml"
chmod 644 "$WORK"/*.toml && chmod 755 "$WORK"
bad_start "$WORK/unknown.toml" listen_port
bad_start "$WORK/bad-value.toml" delivery
bad_start "$WORK/bad-enum.toml" sqlite_synchronous
ok "an unknown key and bad values stop the start, named"

# --- start the installed binary with the installed configuration -----------------------------
# The package's listen address, unless something else holds it on this machine.
if python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 8080))' 2>/dev/null; then PORT=8080; else
    PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
fi
BASE=http://127.0.0.1:$PORT
TOKEN=$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')
start_herald() {
    (cd /var/lib/herald && exec runuser -u herald -- env HERALD_LISTEN=127.0.0.1:$PORT HERALD_ADMIN_TOKEN="$TOKEN" \
        /usr/bin/herald serve --config /etc/herald/herald.toml) >>"$WORK/herald.log" 2>&1 &
    HERALD_PID=$!
    local deadline=$((SECONDS + 60))
    until curl -fsS "$BASE/healthz" >/dev/null 2>&1; do
        kill -0 "$HERALD_PID" 2>/dev/null || fail "herald exited: $(tail -5 "$WORK/herald.log")"
        ((SECONDS < deadline)) || fail "no /healthz within 60 s"
        sleep 0.2
    done
}
stop_herald() { kill "$HERALD_PID"; wait "$HERALD_PID" || true; HERALD_PID=; }
start_herald
api() { curl -fsS -H "Authorization: Bearer $1" -H 'Content-Type: application/json' "${@:2}"; }
customer=$(api "$TOKEN" -d '{"name":"package test"}' "$BASE/api/v1/customers" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
key=$(api "$TOKEN" -d '{"name":"publisher"}' "$BASE/api/v1/customers/$customer/api-keys" | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
status=$(curl -sS -o "$WORK/published.json" -w '%{http_code}' -H "Authorization: Bearer $key" \
    -H 'Content-Type: application/cloudevents+json' \
    -d '{"specversion":"1.0","id":"package-1","source":"/package","type":"package.installed","data":{}}' \
    "$BASE/api/v1/events")
[[ $status == 202 ]] || fail "the publish answered $status: $(cat "$WORK/published.json")"
[[ $(stat -c '%a %U' /var/lib/herald/herald.key) == "600 herald" ]] || fail "herald.key is $(stat -c '%a %U' /var/lib/herald/herald.key)"
[[ -f /var/lib/herald/herald.db ]] || fail "no database in /var/lib/herald"
stop_herald
ok "the installed binary served $BASE/healthz and accepted a publish; herald.key is 600 herald"

# --- upgrade over a changed configuration -----------------------------------------------------
sed -i 's/^publish_burst = 100/publish_burst = 77/' /etc/herald/herald.toml
key_before=$(sha256sum /var/lib/herald/herald.key)
DEBIAN_FRONTEND=noninteractive dpkg -i --force-confdef --force-confold "$WORK/herald-upgrade.deb"
[[ $(dpkg-query -W -f='${Version}' herald) == "$UPGRADE_VERSION" ]] || fail "the upgrade did not install $UPGRADE_VERSION"
grep -q '^publish_burst = 77' /etc/herald/herald.toml || fail "the upgrade replaced the changed configuration"
[[ $(sha256sum /var/lib/herald/herald.key) == "$key_before" ]] || fail "the upgrade changed herald.key"
start_herald
api "$key" "$BASE/api/v1/events?source=/package" | grep -q '"package-1"' || fail "the event published before the upgrade is gone"
stop_herald
ok "the upgrade kept the changed configuration, the key and the data"

# --- remove, then purge -----------------------------------------------------------------------
dpkg -r herald
[[ ! -e /usr/bin/herald ]] || fail "dpkg -r left /usr/bin/herald"
[[ -f /var/lib/herald/herald.db && -f /var/lib/herald/herald.key ]] || fail "dpkg -r removed the data"
dpkg --purge herald
[[ -f /var/lib/herald/herald.db && -f /var/lib/herald/herald.key ]] || fail "dpkg --purge removed the data"
ok "dpkg -r removed the binary and kept /var/lib/herald; so did a purge"
echo "test-package: PASS"
