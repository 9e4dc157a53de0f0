#!/usr/bin/env bash
# A black-box measurement of Herald with tools that know nothing of it: wrk
# publishes single events to the release binary, nginx receives the
# deliveries, and nginx's access log counts them. In the same run, wrk posts
# the same bodies straight to the same nginx: the raw limit of this machine,
# measured before Herald's turn and again after it. The ratio is to the mean
# of the two, and a run whose two raw figures differ by more than 15 % says
# that the machine's speed changed meanwhile.
#
#   bench/wrk-nginx.sh [--database-url postgres://…] [--seconds 10] [--connections 32] [--subscriptions 1]
#                      [--subscription JSON]   (fields every subscription gets besides, such as
#                                               '{"signature":"v1a"}')
#                      [--ceiling durable|bare]
#
# With --ceiling, the program in bench/ceiling takes Herald's place: Herald's HTTP
# stack doing the least a durable webhook service must (`durable`: store each event
# and its message before the 202, record each attempt) or nothing but forwarding
# (`bare`). With --database-url, `durable` stores its rows in a fresh PostgreSQL
# database instead of SQLite. Its figures are what this machine allows any design
# on that stack.
#
# Needs wrk and nginx (Debian: apt-get install wrk nginx-light) and a release
# build (cargo build --release -p server). Loopback only; stops by itself.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

DATABASE_URL=""
SECONDS_RUN=10
CONNECTIONS=32
SUBSCRIPTIONS=1
EXTRA=""
CEILING=""
while (($#)); do
    case $1 in
    --database-url) DATABASE_URL=$2; shift 2 ;;
    --seconds) SECONDS_RUN=$2; shift 2 ;;
    --connections) CONNECTIONS=$2; shift 2 ;;
    --subscriptions) SUBSCRIPTIONS=$2; shift 2 ;;
    --subscription) EXTRA=$2; shift 2 ;;
    --ceiling) CEILING=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
for tool in wrk nginx curl python3; do
    command -v "$tool" >/dev/null || [[ -x /usr/sbin/$tool ]] || { echo "needs $tool" >&2; exit 2; }
done
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
HERALD=${HERALD:-target/release/herald}
case $CEILING in
"") [[ -x $HERALD ]] || { echo "build first: cargo build --release -p server" >&2; exit 2; } ;;
durable | bare)
    CARGO_TARGET_DIR=target/ceiling cargo build --quiet --release --manifest-path bench/ceiling/Cargo.toml
    HERALD=target/ceiling/release/ceiling ;;
*) echo "--ceiling is durable or bare" >&2; exit 2 ;;
esac

WORK=$(mktemp -d /tmp/herald-wrk.XXXXXX)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
NGINX_PORT=$(free_port)
HERALD_PORT=$(free_port)
cleanup() {
    if [[ -f $WORK/nginx.pid ]]; then kill "$(cat "$WORK/nginx.pid")" 2>/dev/null || true; fi
    if [[ -n ${HERALD_PID:-} ]]; then kill "$HERALD_PID" 2>/dev/null || true; fi
    wait 2>/dev/null || true
    if [[ -n ${PG_DB:-} ]]; then psql "$DATABASE_URL" -qc "DROP DATABASE IF EXISTS $PG_DB WITH (FORCE)" >/dev/null 2>&1 || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT
[[ -n ${KEEP:-} ]] && trap - EXIT

# nginx: answers 200 to every POST and logs the arrival time of each.
mkdir -p "$WORK/nginx"
cat >"$WORK/nginx.conf" <<EOF
worker_processes 1;
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $WORK/nginx;
    proxy_temp_path $WORK/nginx;
    fastcgi_temp_path $WORK/nginx;
    uwsgi_temp_path $WORK/nginx;
    scgi_temp_path $WORK/nginx;
    log_format arrival '\$msec \$uri';
    server {
        listen 127.0.0.1:$NGINX_PORT;
        keepalive_requests 1000000;
        location /raw  { access_log $WORK/raw.log arrival buffer=256k; return 200 "ok"; }
        location /hook { access_log $WORK/hook.log arrival buffer=256k; return 200 "ok"; }
    }
}
EOF
"$NGINX" -c "$WORK/nginx.conf" -e "$WORK/nginx-error.log"

EVENT='{"specversion":"1.0","type":"bench.event","source":"/wrk","datacontenttype":"application/json","data":{"order":12345,"amount":"99.90","currency":"EUR","customer":"c-42"}}'
cat >"$WORK/post.lua" <<EOF
-- Every thread numbers its own events ("t1-1", "t1-2", …) so that every id is new.
local threads = 0
function setup(thread)
    threads = threads + 1
    thread:set("prefix", "t" .. threads)
end
counter = 0
function request()
    counter = counter + 1
    local body = string.gsub('$EVENT', '"type"', '"id":"' .. prefix .. "-" .. counter .. '","type"', 1)
    return wrk.format("POST", nil, nil, body)
end
EOF

run_wrk() { # url, header... → requests/s
    local url=$1; shift
    wrk -t2 -c"$CONNECTIONS" -d"${SECONDS_RUN}s" --latency -s "$WORK/post.lua" "$@" -H 'content-type: application/cloudevents+json' "$url" >"$WORK/wrk.out"
    awk '/Requests\/sec/ {print $2}' "$WORK/wrk.out"
}
measured() { # name, value: a run of wrk that printed no rate stops the script
    [[ -n $2 ]] || { echo "wrk measured no $1:" >&2; cat "$WORK/wrk.out" >&2; exit 1; }
}

echo "raw limit: wrk → nginx, $CONNECTIONS connections, ${SECONDS_RUN}s"
RAW_BEFORE=$(run_wrk "http://127.0.0.1:$NGINX_PORT/raw")
measured "raw limit" "$RAW_BEFORE"
echo "  $RAW_BEFORE requests/s"

fresh_postgres() { # a new database beside DATABASE_URL's, dropped at the end; its URL in PG_URL
    PG_DB=herald_wrk_$RANDOM$RANDOM
    psql "$DATABASE_URL" -qc "CREATE DATABASE $PG_DB" >/dev/null
    PG_URL="${DATABASE_URL%/*}/$PG_DB"
}

if [[ -n $CEILING ]]; then
    if [[ $CEILING == durable && -n $DATABASE_URL ]]; then
        fresh_postgres
        export DATABASE=$PG_URL
    elif [[ $CEILING == durable ]]; then
        export DATABASE=$WORK/ceiling.db
    fi
    LISTEN=127.0.0.1:$HERALD_PORT TARGET=http://127.0.0.1:$NGINX_PORT/hook/1 "$HERALD" >"$WORK/herald.log" 2>&1 &
    HERALD_PID=$!
    for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$HERALD_PORT/" && break; sleep 0.1; done
    KEY=none SUBSCRIPTIONS=1
else
    # Herald on a fresh database.
    if [[ -z $DATABASE_URL ]]; then
        HERALD_URL="sqlite://$WORK/herald.db?mode=rwc"
    else
        fresh_postgres
        HERALD_URL=$PG_URL
    fi
    ADMIN=wrk-admin-token-$(python3 -c "import secrets; print(secrets.token_hex(20))")
    HERALD_DATABASE_URL=$HERALD_URL HERALD_LISTEN=127.0.0.1:$HERALD_PORT HERALD_ADMIN_TOKEN=$ADMIN \
        HERALD_ALLOW_PRIVATE_TARGETS=true HERALD_DATA_DIR=$WORK RUST_LOG=warn \
        "$HERALD" serve >"$WORK/herald.log" 2>&1 &
    HERALD_PID=$!
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$HERALD_PORT/healthz" >/dev/null && break; sleep 0.1; done
    api() { curl -sf -X POST "http://127.0.0.1:$HERALD_PORT$1" -H "authorization: Bearer $2" -H 'content-type: application/json' -d "$3"; }
    json() { python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }
    CUSTOMER=$(api /api/v1/customers "$ADMIN" '{"name":"wrk"}' | json id)
    KEY=$(api "/api/v1/customers/$CUSTOMER/api-keys" "$ADMIN" '{"name":"wrk"}' | json token)
    for i in $(seq "$SUBSCRIPTIONS"); do
        body="{\"name\":\"s$i\",\"url\":\"http://127.0.0.1:$NGINX_PORT/hook/$i\",\"event_types\":[\"*\"]}"
        [[ -z $EXTRA ]] || body=$(python3 -c 'import json,sys; b=json.loads(sys.argv[1]); b.update(json.loads(sys.argv[2])); print(json.dumps(b))' "$body" "$EXTRA")
        api /api/v1/subscriptions "$KEY" "$body" >/dev/null
    done
fi
CPU_BEFORE=$(awk '{print $14+$15}' "/proc/$HERALD_PID/stat")

echo "herald${CEILING:+ (the $CEILING ceiling)}: wrk publishes to it ($SUBSCRIPTIONS subscription(s)), ${SECONDS_RUN}s"
# Where the machine's CPU goes meanwhile; the sampler stops a second before wrk, so it never sees the idle tail.
python3 bench/cpu_split.py --seconds "$((SECONDS_RUN - 1))" --herald-pid "$HERALD_PID" >"$WORK/cpu.txt" &
SPLIT_PID=$!
PUBLISH=$(run_wrk "http://127.0.0.1:$HERALD_PORT/api/v1/events" -H "authorization: Bearer $KEY")
measured "publish rate" "$PUBLISH"
PUBLISHED=$(awk '/requests in/ {print $1}' "$WORK/wrk.out")
NON2XX=$(awk '/Non-2xx/ {print $5}' "$WORK/wrk.out")
echo "  $PUBLISH publishes/s ($PUBLISHED requests, ${NON2XX:-0} not accepted)"
awk '/Latency/ && !done {print "  publish latency: mean " $2 ", max " $4; done = 1}' "$WORK/wrk.out"
if wait "$SPLIT_PID"; then cat "$WORK/cpu.txt"; else echo "  (the CPU split could not be measured)"; fi

# Wait until nginx's log stops growing (nginx flushes its buffer every few seconds at most).
EXPECTED=$((PUBLISHED * SUBSCRIPTIONS))
last=-1
for _ in $(seq 120); do
    kill -USR1 "$(cat "$WORK/nginx.pid")" # reopen logs: flushes the buffer
    sleep 1
    now=0
    if [[ -f $WORK/hook.log ]]; then now=$(wc -l <"$WORK/hook.log"); fi
    [[ $now -ge $EXPECTED || $now -eq $last ]] && break
    last=$now
done
kill -USR1 "$(cat "$WORK/nginx.pid")"; sleep 1
CPU_AFTER=$(awk '{print $14+$15}' "/proc/$HERALD_PID/stat")
TICKS=$(getconf CLK_TCK)
HWM=$(awk '/VmHWM/ {print $2}' "/proc/$HERALD_PID/status")

echo "raw limit again, with Herald idle: wrk → nginx, ${SECONDS_RUN}s"
RAW_AFTER=$(run_wrk "http://127.0.0.1:$NGINX_PORT/raw")
measured "raw limit" "$RAW_AFTER"
echo "  $RAW_AFTER requests/s"
python3 - "$WORK/hook.log" "$RAW_BEFORE" "$RAW_AFTER" "$EXPECTED" "$((CPU_AFTER - CPU_BEFORE))" "$TICKS" "$HWM" <<'EOF'
import sys
log, expected, cpu, ticks, hwm = sys.argv[1], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
before, after = float(sys.argv[2]), float(sys.argv[3])
raw = (before + after) / 2
if abs(before - after) > 0.15 * raw:
    print(f"  unsteady: the raw limit was {before:.0f}/s before and {after:.0f}/s after; repeat the run")
times = sorted(float(line.split()[0]) for line in open(log))
span = times[-1] - times[0] if len(times) > 1 else float("nan")
rate = len(times) / span if span else float("nan")
print(f"  {len(times)} of {expected} deliveries logged by nginx over {span:.2f} s")
print(f"deliveries/s {rate:.0f}  raw requests/s {raw:.0f}  ratio {rate / raw:.3f}  herald CPU {cpu / ticks:.1f} s  peak RSS {int(hwm) / 1024:.0f} MB")
sys.exit(0 if len(times) >= expected else 1)
EOF
