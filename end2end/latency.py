#!/usr/bin/env python3
"""Publish-to-receipt latency of a Herald binary (a measurement script, not a test).

Starts `herald serve` on a temp SQLite database (or --database-url; a postgres:// URL gets a fresh
database created on that server and dropped afterwards), creates a customer, an API key and a
structured subscription to a local receiver, then publishes N events one at a time, each after the
previous one has arrived, and prints the median and p99 of publish start -> receipt.

    end2end/.venv/bin/python end2end/latency.py [--bin target/release/herald] [-n 100]
"""

from __future__ import annotations

import argparse
import json
import math
import secrets
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import (  # noqa: E402
    ARTIFACTS_DIR,
    DEFAULT_RELEASE_BIN,
    REPO_ROOT,
    HeraldServer,
    TestDatabase,
    cloud_event,
    utc_stamp,
)
from webhook_receiver import Receiver  # noqa: E402


def percentile(sorted_values: list[float], p: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", type=Path, default=DEFAULT_RELEASE_BIN, help="herald binary (default: %(default)s)")
    parser.add_argument("--database-url", help="sqlite://… or postgres://… (default: a temp SQLite file)")
    parser.add_argument("-n", "--events", type=int, default=100, help="events to publish (default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for each delivery")
    args = parser.parse_args()
    binary = args.bin if args.bin.is_absolute() else (Path.cwd() / args.bin)
    if not binary.is_file() and (REPO_ROOT / args.bin).is_file():
        binary = REPO_ROOT / args.bin

    if not binary.is_file():
        print(
            f"no herald binary at {binary}: build it with `cargo build --release -p server` or pass --bin",
            file=sys.stderr,
        )
        return 2

    database: TestDatabase
    if args.database_url and args.database_url.startswith("sqlite"):
        database = TestDatabase(args.database_url, "sqlite", lambda: None)  # the caller's own file: keep it
    else:
        database = TestDatabase.create(args.database_url)

    log_path = ARTIFACTS_DIR / f"latency-{database.kind}-{utc_stamp()}.log"
    latencies_ms: list[float] = []
    acks_ms: list[float] = []
    with database, Receiver() as receiver, HeraldServer(binary, database.url, log_path=log_path) as herald:
        tenant = herald.new_tenant("latency")
        tenant.client.post(
            "/api/v1/subscriptions",
            json={
                "name": "latency",
                "url": receiver.url("/latency"),
                "event_types": ["latency.probe"],
                "content_mode": "structured",
            },
            expect=201,
        )
        run = secrets.token_hex(4)
        for i in range(args.events):
            event = cloud_event(f"lat-{run}-{i:04d}", "latency.probe", "/latency", {"n": i})
            start = time.monotonic()
            tenant.client.publish(event)
            acked = time.monotonic()
            arrived = receiver.wait_for(
                lambda reqs, want=i + 1: reqs[want - 1] if len(reqs) >= want else None,
                args.timeout,
                f"delivery of event {i + 1}",
            )
            got = json.loads(arrived.body).get("id")
            if got != event["id"]:
                print(f"unexpected delivery: expected {event['id']}, got {got}", file=sys.stderr)
                return 1
            latencies_ms.append((arrived.received_monotonic - start) * 1000)
            acks_ms.append((acked - start) * 1000)
        extra = receiver.count() - args.events

    latencies_ms.sort()
    acks_ms.sort()
    print(f"binary: {binary}")
    print(f"database: {database.kind}; events: {len(latencies_ms)}; log: {log_path}")
    print(
        f"publish -> receipt: median {statistics.median(latencies_ms):.1f} ms, "
        f"p99 {percentile(latencies_ms, 99):.1f} ms, "
        f"min {latencies_ms[0]:.1f} ms, max {latencies_ms[-1]:.1f} ms"
    )
    print(f"publish -> 202:     median {statistics.median(acks_ms):.1f} ms, p99 {percentile(acks_ms, 99):.1f} ms")
    if extra:
        print(f"warning: {extra} more request(s) than events reached the receiver", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
