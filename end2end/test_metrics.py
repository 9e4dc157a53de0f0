"""Herald's metrics as an operator sees them. A real Prometheus (Debian's `prometheus`, on
loopback, in a temporary directory, on a free port, stopped after the test) scrapes a Herald of
this test's own every second and loads `deploy/prometheus/alerts.yml`, while a small load runs:
one endpoint that answers 200, one that answers 503 until its circuit locks, one that refuses
with 400 (its messages dead at once, the endpoint disabled). Prometheus's HTTP API must then show
the backlog held by the locked endpoint, the endpoints by state, the dead letters by reason, and the
locked-endpoint alert pending.

Every wait polls Prometheus until a deadline: Herald re-reads its gauges every 10 s.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests

from conftest import SpawnHerald
from harness import ARTIFACTS_DIR, REPO_ROOT, Tenant, cloud_event, exponential, free_port, unique, utc_stamp, wait_until
from webhook_receiver import Receiver

PROMETHEUS = shutil.which("prometheus")
ALERTS = REPO_ROOT / "deploy" / "prometheus" / "alerts.yml"
DASHBOARD = REPO_ROOT / "deploy" / "grafana" / "herald.json"
# Two failures disable an endpoint, the fourth locks it; probes every second.
BREAKER_ENV = {
    "HERALD_BREAKER_DISABLE_CONSECUTIVE": "2",
    "HERALD_BREAKER_PROBE_SECS": "1",
    "HERALD_BREAKER_LOCK_CONSECUTIVE": "3",
    "HERALD_BREAKER_LOCK_SILENCE_SECS": "0",
}
EVENTS_EACH = 10
# Two refusals: both messages dead at once, and their endpoint disabled (not locked) by the breaker.
REFUSED = 2
WAIT = 60.0  # seconds: the gauges' period, Prometheus's scrape and the breaker's probes


@contextmanager
def prometheus(target: str) -> Iterator[str]:
    """A Prometheus scraping `target` (host:port) every second; yields its base URL."""
    if PROMETHEUS is None:
        pytest.fail("the metrics test needs Prometheus: apt-get install prometheus (./test.sh does it as root)")
    port = free_port()
    log_path = ARTIFACTS_DIR / f"prometheus-{utc_stamp()}.log"
    ARTIFACTS_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="herald-prometheus-") as tmp:
        config = Path(tmp) / "prometheus.yml"
        config.write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            f"rule_files: ['{ALERTS}']\n"
            "scrape_configs:\n"
            "  - job_name: herald\n"
            f"    static_configs: [{{targets: ['{target}']}}]\n"
        )
        with open(log_path, "w") as log:
            process = subprocess.Popen(
                [
                    PROMETHEUS,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={tmp}/data",
                    f"--web.listen-address=127.0.0.1:{port}",
                    "--log.level=warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            base = f"http://127.0.0.1:{port}"
            try:
                wait_until(lambda: _ready(base), 30.0, f"Prometheus to be ready on {base} (log: {log_path})")
                yield base
            finally:
                process.terminate()
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def _ready(base: str) -> bool:
    try:
        return requests.get(f"{base}/-/ready", timeout=2).status_code == 200
    except requests.RequestException:
        return False


def query(base: str, promql: str) -> dict[tuple, float]:
    """An instant query: each series' labels (without __name__, instance and job) → value."""
    resp = requests.get(f"{base}/api/v1/query", params={"query": promql}, timeout=5)
    resp.raise_for_status()
    out = {}
    for item in resp.json()["data"]["result"]:
        labels = tuple(sorted((k, v) for k, v in item["metric"].items() if k not in ("__name__", "instance", "job")))
        out[labels] = float(item["value"][1])
    return out


def value(base: str, promql: str) -> float | None:
    """The value of a query that yields one series, else None."""
    result = query(base, promql)
    return next(iter(result.values())) if len(result) == 1 else None


def subscribe(tenant: Tenant, url: str, event_type: str, policy: dict, timeout_ms: int = 30_000) -> dict:
    body = {
        "name": f"metrics {event_type}",
        "url": url,
        "event_types": [event_type],
        "retry_policy": policy,
        "timeout_ms": timeout_ms,
    }
    return tenant.client.post("/api/v1/subscriptions", json=body, expect=201).json()


def test_prometheus_sees_the_backlog_the_locked_endpoint_and_the_dead_letters(spawn_herald: SpawnHerald) -> None:
    herald = spawn_herald("metrics", env=BREAKER_ENV)
    tenant = herald.new_tenant("metrics")
    with Receiver() as receiver, prometheus(f"127.0.0.1:{herald.port}") as prom:
        wait_until(lambda: value(prom, 'up{job="herald"}') == 1.0, WAIT, "Prometheus to scrape Herald")
        receiver.answer("/down", 503)
        receiver.answer("/refuses", 400)
        every_second = exponential(1, 1, 50)
        transient_only = exponential(1, 1, 5, retry_on="transient")
        subscribe(tenant, receiver.url("/ok"), "metrics.ok", every_second)
        subscribe(tenant, receiver.url("/down"), "metrics.down", every_second)
        subscribe(tenant, receiver.url("/refuses"), "metrics.refused", transient_only)
        for event_type, count in (("metrics.ok", EVENTS_EACH), ("metrics.down", EVENTS_EACH), ("metrics.refused", REFUSED)):
            tenant.client.publish([cloud_event(unique("evt"), event_type, "/metrics") for _ in range(count)])

        # The series, as Prometheus has them.
        endpoints = {(("state", "closed"),): 1.0, (("state", "disabled"),): 1.0, (("state", "locked"),): 1.0}
        wait_until(
            lambda: query(prom, "max by (state) (herald_endpoints)") == endpoints,
            WAIT,
            "herald_endpoints in Prometheus to be one closed, one disabled, one locked",
        )
        wait_until(
            lambda: value(prom, 'sum(herald_dead_messages_total{reason="non_retryable"})') == float(REFUSED),
            WAIT,
            f"herald_dead_messages_total{{reason=non_retryable}} to be {REFUSED}",
        )
        wait_until(
            lambda: value(prom, 'max(herald_messages{state="held"})') == float(EVENTS_EACH)
            and value(prom, 'max(herald_messages{state="dead"})') == float(REFUSED),
            WAIT,
            f"herald_messages to show {EVENTS_EACH} held and {REFUSED} dead",
        )
        # The recording rule is evaluated every second, after the scrape.
        wait_until(
            lambda: (value(prom, "herald:backlog") or 0.0) >= EVENTS_EACH,
            WAIT,
            "the recorded herald:backlog to count the held messages",
        )
        assert set(query(prom, "herald_oldest_due_seconds")) == {(("lane", "fresh"),), (("lane", "retry"),)}
        pool = query(prom, "herald_db_pool_connections")
        assert set(pool) == {(("state", "idle"),), (("state", "in_use"),)}, pool
        ok = [r for r in receiver.requests if r.path == "/ok"]
        assert len(ok) == EVENTS_EACH, f"the healthy endpoint got every event: {len(ok)}"

        # The alert on locked endpoints waits five minutes before firing: it is pending now.
        def pending_alert() -> bool:
            alerts = requests.get(f"{prom}/api/v1/alerts", timeout=5).json()["data"]["alerts"]
            return any(a["labels"]["alertname"] == "HeraldEndpointsLocked" and a["state"] == "pending" for a in alerts)

        wait_until(pending_alert, WAIT, "the HeraldEndpointsLocked alert to be pending")
        rules = requests.get(f"{prom}/api/v1/rules", timeout=5).json()["data"]["groups"]
        names = {r["name"] for g in rules for r in g["rules"]}
        assert {"HeraldDown", "HeraldBacklogGrowing", "HeraldOldestDueMessage", "HeraldEndpointsLocked"} <= names
        assert {"HeraldDeadMessagesRising", "HeraldDatabaseErrors", "herald:backlog"} <= names

        # Every query of the Grafana dashboard is valid PromQL and finds its series.
        board = json.loads(DASHBOARD.read_text())
        for panel in board["panels"]:
            for target in panel["targets"]:
                promql = target["expr"].replace("$__rate_interval", "1m")
                result = query(prom, promql)
                assert result, f"the panel {panel['title']!r} finds nothing: {promql}"


def gauges_of(herald_url: str) -> dict[str, float]:
    """herald_messages by state, from Herald's own /metrics."""
    text = requests.get(f"{herald_url}/metrics", timeout=5).text
    out = {}
    for line in text.splitlines():
        if line.startswith('herald_messages{state="'):
            labels, number = line.rsplit(" ", 1)
            out[labels.split('"')[1]] = float(number)
    return out


def test_after_a_kill_the_gauges_match_the_table(spawn_herald: SpawnHerald) -> None:
    """The gauges are read from the database, not kept in memory: killed with SIGKILL in the middle
    of a load and started again, Herald reports exactly what the delivery log lists by state."""
    herald = spawn_herald("metrics-kill", env=BREAKER_ENV)
    tenant = herald.new_tenant("metrics-kill")
    with Receiver() as receiver:
        receiver.answer("/down", 503)
        # A short timeout: the leases the kill leaves behind run out a second after it.
        subscribe(tenant, receiver.url("/ok"), "kill.ok", exponential(1, 1, 50), timeout_ms=1000)
        subscribe(tenant, receiver.url("/down"), "kill.down", exponential(1, 1, 50), timeout_ms=1000)
        subscribe(
            tenant, receiver.url("/refuses"), "kill.refused", exponential(1, 1, 5, retry_on="transient"), timeout_ms=1000
        )
        receiver.answer("/refuses", 400)
        for event_type, count in (("kill.ok", 40), ("kill.down", 20), ("kill.refused", REFUSED)):
            tenant.client.publish([cloud_event(unique("evt"), event_type, "/metrics") for _ in range(count)])
        wait_until(lambda: len(receiver.requests) >= 10, WAIT, "deliveries to start before the kill")
        assert herald.kill() == -9
        herald.restart()

        def by_state() -> dict[str, float]:
            counts = {}
            for state in ("pending", "delivering", "held", "dead", "delivered"):
                counts[state] = float(len(tenant.client.list_all("/api/v1/messages", params={"state": state})))
            return counts

        # Once the load has settled (everything delivered, dead, or held by the locked endpoint), the
        # gauges equal the table's counts, state by state.
        expected = {"pending": 0.0, "delivering": 0.0, "held": 20.0, "dead": float(REFUSED), "delivered": 40.0}
        wait_until(lambda: by_state() == expected, WAIT, f"the messages to settle at {expected}")
        wait_until(lambda: gauges_of(herald.base_url) == expected, WAIT, f"/metrics to show {expected}")
