#!/usr/bin/env bash
# Herald's instructions per delivery, counted by valgrind (callgrind), grouped
# by crate. Unlike seconds, the count barely moves from run to run whatever
# else the machine is doing (only the group commits' batch sizes vary), so it
# shows a change of a few percent that the timed benchmarks cannot tell from
# their noise.
#
# herald-bench runs the release binary under callgrind twice, with a small and
# a large number of events (one subscription unless --subscriptions says more,
# each with --filter when given and the fields of --subscription (a JSON object),
# and --schema puts the published type in the catalog with a schema of ten properties);
# the difference between the two runs, divided
# by the difference in deliveries, leaves out start-up and setup.
#
#   bench/instructions.sh [--database-url postgres://…] [--small 1000] [--large 4000]
#                         [--subscriptions 1] [--filter CEL] [--schema] [--subscription JSON]
#
# Needs valgrind and python3 (Debian: apt-get install valgrind) and a release
# build (cargo build --release -p server --bins). Loopback only; stops by
# itself. KEEP=1 keeps the callgrind files (named by run) for
# `callgrind_annotate --inclusive=yes FILE`. Under valgrind the CPU has no SHA
# extensions, so sha2 counts its software rounds, which the native binary
# does in hardware.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

DATABASE_URL=""
SMALL=1000
LARGE=4000
SUBSCRIPTIONS=1
FILTER=""
SCHEMA=""
EXTRA=""
while (($#)); do
    case $1 in
    --schema) SCHEMA=--schema; shift ;;
    --subscriptions) SUBSCRIPTIONS=$2; shift 2 ;;
    --filter) FILTER=$2; shift 2 ;;
    --subscription) EXTRA=$2; shift 2 ;;
    --database-url) DATABASE_URL=$2; shift 2 ;;
    --small) SMALL=$2; shift 2 ;;
    --large) LARGE=$2; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
for tool in valgrind callgrind_annotate python3; do
    command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 2; }
done
HERALD=$(realpath "${HERALD:-target/release/herald}")
BENCH=${BENCH:-target/release/herald-bench}
[[ -x $HERALD && -x $BENCH ]] || { echo "build first: cargo build --release -p server --bins" >&2; exit 2; }

WORK=$(mktemp -d /tmp/herald-instructions.XXXXXX)
if [[ -n ${KEEP:-} ]]; then echo "keeping $WORK" >&2; else trap 'rm -rf "$WORK"' EXIT; fi
cat >"$WORK/herald" <<EOF
#!/bin/sh
exec valgrind --tool=callgrind --callgrind-out-file=$WORK/callgrind.\$\$ "$HERALD" "\$@"
EOF
chmod +x "$WORK/herald"

count() { # events → the per-function counts of one run, in $WORK/$1.txt
    local events=$1
    rm -f "$WORK"/callgrind.*
    echo "herald under callgrind: $events events" >&2
    "$BENCH" --herald "$WORK/herald" --events "$events" --concurrency 32 --subscriptions "$SUBSCRIPTIONS" \
        ${FILTER:+--filter "$FILTER"} ${EXTRA:+--subscription "$EXTRA"} $SCHEMA --scenario steady ${DATABASE_URL:+--database-url "$DATABASE_URL"} --json "$WORK/bench.json" >"$WORK/bench.log" 2>&1 ||
        { cat "$WORK/bench.log" >&2; exit 1; }
    # herald-bench stops Herald with SIGTERM and kills it after 10 s; killed, callgrind writes nothing.
    local files=("$WORK"/callgrind.*)
    [[ ${#files[@]} -eq 1 && -f ${files[0]} ]] ||
        { echo "no callgrind output: Herald did not exit in time under valgrind (see $WORK/bench.log)" >&2; exit 1; }
    mv "${files[0]}" "$WORK/$events.callgrind"
    callgrind_annotate --auto=no --threshold=100 "$WORK/$events.callgrind" >"$WORK/$events.txt"
}
count "$SMALL"
count "$LARGE"

python3 - "$WORK/$SMALL.txt" "$WORK/$LARGE.txt" "$(((LARGE - SMALL) * SUBSCRIPTIONS))" <<'EOF'
import collections, re, sys

def by_crate(path):
    """Instructions per crate (from each function's source path), and the program's total."""
    crates, total = collections.Counter(), 0
    for line in open(path):
        if "PROGRAM TOTALS" in line:
            total = int(line.split()[0].replace(",", ""))
        found = re.match(r"^\s*([\d,]+) \(\s*[\d.]+%\)\s+(\S+?):(.*)$", line)
        if not found:
            continue
        count, source, function = int(found.group(1).replace(",", "")), found.group(2), found.group(3)
        crate = re.search(r"/registry/src/[^/]+/([A-Za-z0-9_\-]+?)-\d", source)
        if crate:
            name = crate.group(1)
        elif "/rustc/" in source:  # the standard library's code, generic or inlined: counted for the function's crate
            name = re.sub(r"^<+", "", function).split("::")[0]
            name = {"herald": "server"}.get(name, name)  # the server crate's library is named herald
        elif source.startswith("./") or "libc" in function:
            name = "libc (memcpy, memset)"
        else:
            name = source.rsplit("/src/", 1)[0].rsplit("/", 1)[-1] or source
        crates[name.replace("-", "_")] += count
    return crates, total

(small, small_total), (large, large_total) = by_crate(sys.argv[1]), by_crate(sys.argv[2])
deliveries = int(sys.argv[3])
per = {name: (large[name] - small.get(name, 0)) / deliveries for name in large}
total = (large_total - small_total) / deliveries
print(f"\n{total:,.0f} instructions per delivery")
for name, count in sorted(per.items(), key=lambda item: -item[1])[:20]:
    print(f"{count:>10,.0f}  {100 * count / total:5.1f} %  {name}")
EOF
