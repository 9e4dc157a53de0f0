#!/usr/bin/env python3
"""Where the machine's CPU went while a load ran: CPU seconds per process group
(herald, postgres, nginx, wrk, the kernel's own threads, the rest), how busy the
cores were, and how long herald's threads waited for a core while runnable.

    cpu_split.py --seconds 8 --herald-pid 1234

Reads /proc only; samples every half second so that processes which exit
meanwhile still count up to their last sample.
"""

import argparse
import collections
import os
import time

TICKS = os.sysconf("SC_CLK_TCK")


def processes():
    """pid -> (comm, start time, CPU ticks used so far). The start time tells a reused pid from
    the same process; the name cannot, since a kernel worker's name changes with its work."""
    seen = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = open(f"/proc/{pid}/stat").read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        seen[pid] = (comm, int(fields[19]), int(fields[11]) + int(fields[12]))
    return seen


def group(pid, comm, herald_pid):
    if pid == herald_pid:
        return "herald"
    if comm.startswith("postgres"):
        return "postgres"
    if comm in ("nginx", "wrk"):
        return comm
    if comm.startswith(("kworker", "ksoftirqd", "kswapd", "jbd2", "rcu_")):
        return "kernel threads"
    return "other"


def cores():
    """(busy ticks, all ticks) of the whole machine; steal counts as busy."""
    values = list(map(int, open("/proc/stat").readline().split()[1:9]))
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


def waits(pid):
    """(ns running, ns runnable but waiting for a core) summed over the process's threads."""
    run = wait = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            r, w, _ = map(int, open(f"/proc/{pid}/task/{tid}/schedstat").read().split())
        except (OSError, ValueError):
            continue
        run, wait = run + r, wait + w
    return run, wait


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--herald-pid", required=True)
    args = parser.parse_args()

    start, last = processes(), {}
    busy0, all0 = cores()
    run0, wait0 = waits(args.herald_pid)
    deadline = time.monotonic() + args.seconds
    while time.monotonic() < deadline:
        time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
        last.update(processes())
    busy1, all1 = cores()
    run1, wait1 = waits(args.herald_pid)

    used = collections.Counter()
    for pid, (comm, started, ticks) in last.items():
        before = start.get(pid)
        base = before[2] if before and before[1] == started else 0
        used[group(pid, comm, args.herald_pid)] += (ticks - base) / TICKS
    split = ", ".join(f"{name} {seconds:.1f}" for name, seconds in used.most_common() if seconds >= 0.05)
    busy = (busy1 - busy0) / max(1, all1 - all0)
    run, wait = (run1 - run0) / 1e9, (wait1 - wait0) / 1e9
    print(f"  CPU s over {args.seconds:.0f} s on {os.cpu_count()} cores ({busy:.0%} busy): {split}")
    print(f"  herald's threads ran {run:.1f} s and waited {wait:.1f} s for a core while runnable")


if __name__ == "__main__":
    main()
