#!/usr/bin/env bash
# Herald's one test command: Rust tests, then the end-to-end tests against the built binary.
#
#   ./test.sh                 # SQLite
#   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/herald_test ./test.sh
#   ./test.sh -k preview -x   # extra arguments go to pytest
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")"

PYTHON=${PYTHON:-python3}
VENV=end2end/.venv
REQUIREMENTS=end2end/requirements.txt
STAMP=$VENV/.requirements.sha256
TARGET_DIR=${CARGO_TARGET_DIR:-target}
case $TARGET_DIR in /*) ;; *) TARGET_DIR=$PWD/$TARGET_DIR ;; esac

phase() { printf '\n==> %s\n' "$*"; }

phase "[1/5] Python environment for the end-to-end tests ($VENV)"
if ! "$VENV/bin/python" -c 'import sys' >/dev/null 2>&1; then
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
fi
wanted=$(sha256sum "$REQUIREMENTS" | cut -d' ' -f1)
if [[ ! -f $STAMP || $(<"$STAMP") != "$wanted" ]]; then
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$REQUIREMENTS"
    echo "$wanted" >"$STAMP"
else
    echo "requirements unchanged"
fi

# The dashboard's browser tests drive Debian's Chromium (never a browser downloaded by Playwright)
# and check each page with axe-core (an npm package); the durability tests watch Herald's flushes
# with strace.
CHROMIUM=/usr/bin/chromium
missing=()
[[ -x $CHROMIUM ]] || missing+=(chromium)
command -v strace >/dev/null || missing+=(strace)
command -v npm >/dev/null || missing+=(npm)
# The alert rules are checked with promtool; the metrics' end-to-end test scrapes with a real Prometheus.
command -v promtool >/dev/null && command -v prometheus >/dev/null || missing+=(prometheus)
if ((${#missing[@]} > 0)); then
    if ((EUID == 0)); then
        phase "installing ${missing[*]} for the end-to-end tests"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
    else
        echo "error: the end-to-end tests need ${missing[*]}:" >&2
        echo "       sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
        exit 1
    fi
fi
[[ -x $CHROMIUM ]] || { echo "error: $CHROMIUM is still missing after apt-get install chromium" >&2; exit 1; }

NODE_LOCK=end2end/package-lock.json
NODE_STAMP=end2end/node_modules/.package-lock.sha256
wanted=$(sha256sum "$NODE_LOCK" | cut -d' ' -f1)
if [[ ! -f $NODE_STAMP || $(<"$NODE_STAMP") != "$wanted" ]]; then
    npm ci --prefix end2end --no-audit --no-fund --loglevel=error
    echo "$wanted" >"$NODE_STAMP"
else
    echo "npm packages unchanged"
fi

if [[ -n ${TEST_DATABASE_URL:-} ]]; then database="TEST_DATABASE_URL is set"; else database="SQLite only"; fi
phase "[2/5] Prometheus alert rules (promtool check rules, promtool test rules)"
promtool check rules deploy/prometheus/alerts.yml
(cd deploy/prometheus && promtool test rules alerts_test.yml)

phase "[3/5] cargo test --workspace --exclude frontend ($database)"
cargo test --workspace --exclude frontend

phase "[4/5] cargo build -p server"
cargo build -p server

phase "[5/5] end-to-end tests (pytest end2end) against $TARGET_DIR/debug/herald"
HERALD_BIN=$TARGET_DIR/debug/herald "$VENV/bin/python" -m pytest end2end -q -p no:cacheprovider "$@"
