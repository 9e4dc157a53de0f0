"""Hostile input and hostile receivers, checked black-box against the built binary over its REST API.

1. Hostile receivers (loopback only). Each case is a small raw-socket receiver written here, a
   subscription pointing at it, one published event, and then the attempt rows and the message state
   from `GET /api/v1/messages/{id}`:
   - a receiver that accepts, reads and never answers: the attempt ends within timeout_ms + 10 %,
     error_kind `timeout`, and the message waits for its retry;
   - a receiver that sends a 200 status line and headers, then trickles the body at 1 byte/s: the one
     deadline covers the body too (no answer in time is a `timeout` failure);
   - a 200 with a 1 GB body streamed fast: Herald stops reading at its cap (64 KiB), records
     `body_too_large`, keeps at most 4 KiB of it, and its memory does not grow by 50 MB; the receiver
     answered 2xx, so the message is delivered (a long body is no reason to deliver twice);
   - a gzip bomb (`Content-Encoding: gzip`, 4 MB that expand to 4 GiB): never expanded beyond the cap;
   - redirects (301, 302, 303, 307, 308) whose Location is a canary listener: never followed, recorded
     as failures with their status;
   - a connection reset (RST) in the middle of the headers or of the body: a transport error kind,
     the message kept for its retry (neither lost nor delivered);
   - 429 with an absurd `Retry-After`: the retry is clamped to the policy's remaining time (its TTL).
2. SSRF end to end: a herald of its own with `allow_private_targets` off and a canary listener on
   127.0.0.1 (and [::1]) on one port; ~30 spellings of loopback, private, link-local and metadata
   addresses aimed at it are either refused at creation (problem+json naming `url`) or accepted and
   then blocked at delivery (`blocked_target`, dead). Not one connection reaches the canary, while the
   same loopback spellings, sent by the session's herald (private targets allowed), do reach it.

Nothing waits a fixed time for an outcome: every wait polls until a deadline. A receiver's own script
may pause (e.g. before it resets the connection): that is the receiver's behaviour, not a wait.
Which spelling was refused where, the memory figures and the bytes each receiver managed to send are
printed (`pytest -rA` / `-s`) and appended to end2end/artifacts/hostile-report.log.
"""

from __future__ import annotations

import json
import select
import socket
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

import pytest

from harness import (
    ARTIFACTS_DIR,
    HeraldServer,
    Tenant,
    cloud_event,
    describe,
    exponential,
    unique,
    utc_stamp,
    wait_until,
)
from webhook_receiver import Answer, Receiver

# Subscriptions of the timing cases use a small timeout (the minimum is 1000).
TIMEOUT_MS = 2000
# "The attempt ends within timeout_ms + 10 %."
DEADLINE_SLACK = 1.10
# Body cases get a longer timeout, so that what stops the read is the cap, not the deadline.
BODY_TIMEOUT_MS = 10_000
# Herald's memory may not grow by this much while it deals with a huge answer.
MEMORY_BUDGET_KB = 50 * 1024
# Herald reads at most 64 KiB of an answer (README); what the receiver manages to push is that plus
# the socket buffers of both ends (a few MB on loopback) — never anything near the 1 GB offered.
SENT_BYTES_BOUND = 64 * 1024 * 1024
KEPT_BODY_BYTES = 4096
ONE_GB = 1 << 30

TRANSPORT_ERROR_KINDS = {"connect", "other"}


# One failure leaves the message pending with its retry ten minutes away: it is neither lost nor
# delivered, and nothing more happens during the test.
RETRY_IN_10_MIN = exponential(600, 600, max_attempts=3)


# ---------------------------------------------------------------------------------------------
# Raw-socket receivers


@dataclass
class Conn:
    """What one accepted connection saw and did."""

    peer: Any
    accepted_at: float  # time.monotonic()
    requests: list[bytes] = field(default_factory=list)  # request heads, in order
    bytes_sent: int = 0
    peer_closed_at: float | None = None  # when herald's side closed (EOF, EPIPE or reset)
    ended_at: float | None = None  # when the script finished with the connection
    error: str | None = None

    def head(self, i: int = 0) -> str:
        return self.requests[i].decode("latin-1") if len(self.requests) > i else ""


Script = Callable[[socket.socket, Conn, threading.Event], None]


class RawListener:
    """A TCP listener on 127.0.0.1:<random port> (and [::1] on the same port with `ipv6=True`, where
    the machine has it) that runs `script(sock, conn, stopping)` on every accepted connection, each
    in a thread of its own, and records each connection. `stop()` (or leaving the `with`) sets
    `stopping`, which every script honours within 0.1 s, closes everything and joins the threads."""

    def __init__(self, script: Script, name: str, ipv6: bool = False):
        self.script, self.name, self.want_ipv6 = script, name, ipv6
        self.ipv6 = False
        self.port = 0
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._conns: list[Conn] = []
        self._listeners: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._open: list[socket.socket] = []

    def start(self) -> RawListener:
        v4 = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        v4.bind(("127.0.0.1", 0))
        v4.listen(128)
        self.port = v4.getsockname()[1]
        self._listeners.append(v4)
        if self.want_ipv6 and socket.has_ipv6:
            try:
                v6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
                v6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                v6.bind(("::1", self.port))
                v6.listen(128)
                self._listeners.append(v6)
                self.ipv6 = True
            except OSError:
                v6.close()
        accept = threading.Thread(target=self._accept_loop, name=f"{self.name}-accept", daemon=True)
        accept.start()
        self._threads.append(accept)
        return self

    def _accept_loop(self) -> None:
        while not self.stopping.is_set():
            ready, _, _ = select.select(self._listeners, [], [], 0.1)
            for listener in ready:
                try:
                    sock, peer = listener.accept()
                except OSError:
                    continue
                conn = Conn(peer=peer, accepted_at=time.monotonic())
                with self._lock:
                    self._conns.append(conn)
                    self._open.append(sock)
                worker = threading.Thread(target=self._run, args=(sock, conn), name=f"{self.name}-conn", daemon=True)
                self._threads.append(worker)
                worker.start()

    def _run(self, sock: socket.socket, conn: Conn) -> None:
        try:
            self.script(sock, conn, self.stopping)
        except OSError as exc:
            conn.error = repr(exc)
            if conn.peer_closed_at is None and isinstance(exc, (BrokenPipeError, ConnectionResetError)):
                conn.peer_closed_at = time.monotonic()
        finally:
            conn.ended_at = time.monotonic()
            sock.close()

    def stop(self) -> None:
        self.stopping.set()
        for thread in list(self._threads):
            thread.join(timeout=5)
        for sock in self._listeners:
            sock.close()
        with self._lock:
            for sock in self._open:
                sock.close()

    def __enter__(self) -> RawListener:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def connections(self) -> list[Conn]:
        with self._lock:
            return list(self._conns)

    def count(self) -> int:
        with self._lock:
            return len(self._conns)


def first_conn(listener: RawListener, attr: str) -> Any:
    """`attr` of the listener's first connection (None before there is one)."""
    conns = listener.connections()
    return getattr(conns[0], attr) if conns else None


def recv_some(sock: socket.socket, stopping: threading.Event) -> bytes:
    """The next bytes from the peer; b"" when it closed (or reset) or the listener stops."""
    sock.settimeout(0.1)
    while not stopping.is_set():
        try:
            return sock.recv(65536)
        except TimeoutError:
            continue
        except ConnectionResetError:
            return b""
    return b""


def read_request(sock: socket.socket, conn: Conn, stopping: threading.Event) -> bytes | None:
    """Reads one HTTP request (head, and a Content-Length body); returns its head, or None when the
    peer closed first."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = recv_some(sock, stopping)
        if not chunk:
            return None
        buf += chunk
    head, _, body = buf.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = recv_some(sock, stopping)
        if not chunk:
            return None
        body += chunk
    conn.requests.append(head)
    return head


def wait_peer_close(sock: socket.socket, conn: Conn, stopping: threading.Event) -> None:
    """Reads (and drops) whatever comes until herald closes its side; notes when."""
    while recv_some(sock, stopping):
        pass
    if not stopping.is_set():
        conn.peer_closed_at = time.monotonic()


def send_stream(
    sock: socket.socket, conn: Conn, stopping: threading.Event, chunks: Iterator[bytes | memoryview]
) -> None:
    """Pushes the chunks as fast as herald takes them, counting the bytes, until they run out, herald
    closes the connection, or the listener stops."""
    sock.settimeout(0.1)
    for chunk in chunks:
        view = memoryview(chunk)
        while view:
            if stopping.is_set():
                return
            try:
                n = sock.send(view)
            except TimeoutError:
                continue  # herald is not reading right now
            except (BrokenPipeError, ConnectionResetError):
                conn.peer_closed_at = time.monotonic()
                return
            conn.bytes_sent += n
            view = view[n:]


def reset(sock: socket.socket) -> None:
    """Closes with SO_LINGER 0: the kernel sends an RST instead of a FIN."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def response_head(status: str, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status}"] + [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


# -- the hostile scripts --------------------------------------------------------------------------


def never_answers(sock: socket.socket, conn: Conn, stopping: threading.Event) -> None:
    if read_request(sock, conn, stopping) is not None:
        wait_peer_close(sock, conn, stopping)


TRICKLE_LENGTH = 100


def trickles_the_body(sock: socket.socket, conn: Conn, stopping: threading.Event) -> None:
    """200 and its headers at once, then the body one byte per second."""
    if read_request(sock, conn, stopping) is None:
        return
    sock.sendall(response_head("200 OK", {"content-type": "text/plain", "content-length": str(TRICKLE_LENGTH)}))
    for _ in range(TRICKLE_LENGTH):
        next_byte = time.monotonic() + 1.0
        while (remaining := next_byte - time.monotonic()) > 0:
            if stopping.is_set():
                return
            readable, _, _ = select.select([sock], [], [], min(remaining, 0.1))
            if readable:
                try:
                    closed = sock.recv(4096) == b""
                except ConnectionResetError:
                    closed = True
                if closed:
                    conn.peer_closed_at = time.monotonic()
                    return
        try:
            sock.sendall(b"x")
        except (BrokenPipeError, ConnectionResetError):
            conn.peer_closed_at = time.monotonic()
            return
        conn.bytes_sent += 1


def one_gb_body(size: int = 64 * 1024) -> Iterator[memoryview]:
    """1 GB of body as slices of one 64 KiB buffer: never held in memory."""
    block = memoryview(b"x" * size)
    left = ONE_GB
    while left > 0:
        yield block[: min(size, left)]
        left -= size


def sends_one_gb(sock: socket.socket, conn: Conn, stopping: threading.Event) -> None:
    if read_request(sock, conn, stopping) is None:
        return
    sock.sendall(response_head("200 OK", {"content-type": "text/plain", "content-length": str(ONE_GB)}))
    send_stream(sock, conn, stopping, one_gb_body())
    if conn.peer_closed_at is None:
        wait_peer_close(sock, conn, stopping)


GZIP_CHUNK = 16 << 20
GZIP_CHUNKS = 256  # 4 GiB of zeros


@lru_cache(maxsize=1)
def gzip_bomb() -> bytes:
    """One valid gzip member of about 4 MB that expands to 4 GiB of zeros. A full flush after each
    16 MiB of zeros resets the compressor, so every further 16 MiB compresses to the same block:
    compress twice, repeat the block, and write the CRC and size of the whole by hand."""
    zeros = bytes(GZIP_CHUNK)
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    first = compressor.compress(zeros) + compressor.flush(zlib.Z_FULL_FLUSH)
    block = compressor.compress(zeros) + compressor.flush(zlib.Z_FULL_FLUSH)
    end = compressor.flush(zlib.Z_FINISH)[:-8]  # the final empty block, without zlib's trailer
    crc = 0
    for _ in range(GZIP_CHUNKS):
        crc = zlib.crc32(zeros, crc)
    trailer = struct.pack("<II", crc, (GZIP_CHUNK * GZIP_CHUNKS) & 0xFFFFFFFF)
    return first + block * (GZIP_CHUNKS - 1) + end + trailer


def sends_gzip_bomb(sock: socket.socket, conn: Conn, stopping: threading.Event) -> None:
    if read_request(sock, conn, stopping) is None:
        return
    bomb = gzip_bomb()
    headers = {"content-type": "application/json", "content-encoding": "gzip", "content-length": str(len(bomb))}
    sock.sendall(response_head("503 Service Unavailable", headers))
    send_stream(sock, conn, stopping, iter([bomb]))
    if conn.peer_closed_at is None:
        wait_peer_close(sock, conn, stopping)


def redirects_to(location_of: Callable[[str], str]) -> Script:
    """Answers each request with the redirect status named by its path (`/redirect-308` → 308)
    to `location_of(path)`."""
    reasons = {
        301: "Moved Permanently", 302: "Found", 303: "See Other", 307: "Temporary Redirect", 308: "Permanent Redirect"
    }

    def script(sock: socket.socket, conn: Conn, stopping: threading.Event) -> None:
        while (head := read_request(sock, conn, stopping)) is not None:
            path = head.split(b" ")[1].decode()
            code = int(path.rsplit("-", 1)[1])
            headers = {"location": location_of(path), "content-length": "0", "connection": "close"}
            sock.sendall(response_head(f"{code} {reasons[code]}", headers))
            return

    return script


def resets_mid_response(where: str) -> Script:
    """Answers part of the response (a cut-off header line, or the headers and 100 of 1000 body
    bytes), pauses, then resets the connection."""

    def script(sock: socket.socket, conn: Conn, stopping: threading.Event) -> None:
        if read_request(sock, conn, stopping) is None:
            return
        if where == "headers":
            partial = b"HTTP/1.1 200 OK\r\ncontent-type: text/pl"
        else:
            partial = response_head("200 OK", {"content-type": "text/plain", "content-length": "1000"}) + b"y" * 100
        sock.sendall(partial)
        conn.bytes_sent += len(partial)
        # The receiver's own pause: the partial answer reaches herald before the reset does.
        if not stopping.wait(0.3):
            reset(sock)

    return script


def canary(sock: socket.socket, conn: Conn, stopping: threading.Event) -> None:
    """Counts (the listener records every connection) and answers 204, so that a herald that reached
    it would even call the delivery a success."""
    if read_request(sock, conn, stopping) is not None:
        sock.sendall(response_head("204 No Content", {"connection": "close"}))


# ---------------------------------------------------------------------------------------------
# API helpers


def subscribe(tenant: Tenant, url: str, event_type: str, retry_policy: Any, **extra: Any) -> dict:
    body = {"name": f"hostile {event_type}", "url": url, "event_types": [event_type], "retry_policy": retry_policy}
    body.update(extra)
    return tenant.client.post("/api/v1/subscriptions", json=body, expect=201).json()


def publish(tenant: Tenant, event_type: str) -> list[str]:
    """Publishes one event; returns its message ids."""
    resp = tenant.client.publish(cloud_event(unique("evt"), event_type, "/hostile"))
    (entry,) = resp.json()["events"]
    return entry["message_ids"]


def publish_one(tenant: Tenant, event_type: str) -> str:
    ids = publish(tenant, event_type)
    assert len(ids) == 1, f"one event for one subscription makes one message: {ids}"
    return ids[0]


def message(tenant: Tenant, message_id: str) -> dict:
    return tenant.client.get(f"/api/v1/messages/{message_id}", expect=200).json()


def wait_attempted(tenant: Tenant, message_id: str, attempts: int = 1, timeout: float = 20.0) -> dict:
    """Polls until the message has `attempts` attempt rows and is not being delivered; returns it."""

    def settled() -> dict | None:
        m = message(tenant, message_id)
        return m if len(m["attempts"]) >= attempts and m["state"] != "delivering" else None

    try:
        return wait_until(settled, timeout, f"message {message_id} to have {attempts} attempt(s)")
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}; it is: {json.dumps(message(tenant, message_id))}") from None


def wait_terminal(tenant: Tenant, message_id: str, timeout: float = 20.0) -> dict:
    def terminal() -> dict | None:
        m = message(tenant, message_id)
        return m if m["state"] in ("delivered", "dead") else None

    try:
        return wait_until(terminal, timeout, f"message {message_id} to be delivered or dead")
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}; it is: {json.dumps(message(tenant, message_id))}") from None


def summary(detail: dict) -> list[tuple]:
    return [(a["number"], a["status_code"], a["error_kind"], a["outcome"]) for a in detail["attempts"]]


def shown(detail: dict) -> str:
    """The message and its attempts, for assertion messages (request headers left out)."""
    slim = dict(detail)
    slim.pop("event", None)
    slim["attempts"] = [
        {k: (v[:200] if isinstance(v, str) else v) for k, v in a.items() if k != "request_headers"}
        for a in detail["attempts"]
    ]
    return json.dumps(slim)


def rfc3339(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def assert_retry_scheduled(detail: dict, delay_secs: int = 600) -> None:
    """The message failed once and waits for its retry: pending, one attempt, next try `delay_secs`
    after the first (neither lost nor delivered)."""
    assert detail["state"] == "pending" and detail["dead_reason"] is None, f"kept for its retry: {shown(detail)}"
    assert detail["delivered_at"] is None, f"not delivered: {shown(detail)}"
    assert detail["attempt_count"] == 1 and len(detail["attempts"]) == 1, shown(detail)
    assert detail["next_attempt_at"], f"a pending message has its next attempt time: {shown(detail)}"
    wait = (rfc3339(detail["next_attempt_at"]) - rfc3339(detail["attempts"][0]["started_at"])).total_seconds()
    assert delay_secs - 10 <= wait <= delay_secs + 15, (
        f"the retry is due {delay_secs} s later, not {wait:.1f} s: {shown(detail)}"
    )


def memory_kb(server: HeraldServer) -> dict[str, int]:
    """VmRSS and VmHWM (peak) of the herald process, in kB."""
    assert server.process is not None and server.process.poll() is None, "herald is not running"
    values: dict[str, int] = {}
    with open(f"/proc/{server.process.pid}/status") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                values[name] = int(rest.split()[0])
    assert set(values) == {"VmRSS", "VmHWM"}, f"/proc/{server.process.pid}/status lacks VmRSS/VmHWM: {values}"
    return values


def assert_memory_bounded(before: dict[str, int], after: dict[str, int], case: str) -> None:
    grew = {k: after[k] - before[k] for k in before}
    assert grew["VmHWM"] < MEMORY_BUDGET_KB and grew["VmRSS"] < MEMORY_BUDGET_KB, (
        f"{case}: herald's memory grew by {grew['VmRSS'] // 1024} MB (RSS) / {grew['VmHWM'] // 1024} MB (peak), "
        f"more than {MEMORY_BUDGET_KB // 1024} MB: before {before}, after {after}"
    )


def report(test: str, lines: list[str]) -> None:
    text = "\n".join(f"[{test}] {line}" for line in lines)
    print(text)
    ARTIFACTS_DIR.mkdir(parents=True, exist_ok=True)
    with open(ARTIFACTS_DIR / "hostile-report.log", "a") as f:
        f.write(f"=== {utc_stamp()}\n{text}\n")


def log_lines(server: HeraldServer, *needles: str, limit: int = 20) -> str:
    """The herald log lines that mention any of `needles` (for assertion messages)."""
    try:
        text = server.log_path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    hits = [line for line in text.splitlines() if any(n in line for n in needles)]
    return "\n".join(hits[-limit:]) or "(no matching log lines)"


@pytest.fixture
def tenant(herald: HeraldServer) -> Tenant:
    return herald.new_tenant("hostile")


# ---------------------------------------------------------------------------------------------
# 1. Hostile receivers


def test_a_receiver_that_accepts_and_never_answers_is_cut_at_timeout_ms(herald: HeraldServer, tenant: Tenant) -> None:
    event_type = unique("never")
    with RawListener(never_answers, "never") as rx:
        subscribe(tenant, rx.url("/never"), event_type, RETRY_IN_10_MIN, timeout_ms=TIMEOUT_MS)
        message_id = publish_one(tenant, event_type)
        detail = wait_attempted(tenant, message_id, timeout=TIMEOUT_MS / 1000 + 20)
        conns = rx.connections()
        closed = wait_until(lambda: first_conn(rx, "peer_closed_at"), 10, "herald to close the connection")

    attempt = detail["attempts"][0]
    held_open = closed - conns[0].accepted_at
    report("never-answers", [f"attempt {summary(detail)} duration_ms {attempt['duration_ms']}; herald closed "
                             f"the connection {held_open:.3f} s after it opened it"])
    assert summary(detail) == [(1, None, "timeout", "retryable")], shown(detail)
    assert TIMEOUT_MS - 50 <= attempt["duration_ms"] <= TIMEOUT_MS * DEADLINE_SLACK, (
        f"the attempt ends at its timeout_ms {TIMEOUT_MS} (+10 %): duration_ms {attempt['duration_ms']}"
    )
    assert held_open <= TIMEOUT_MS / 1000 * DEADLINE_SLACK + 0.5, f"herald held the connection {held_open:.3f} s"
    assert len(conns) == 1 and len(conns[0].requests) == 1, "one request on one connection"
    assert_retry_scheduled(detail)


def test_a_body_trickled_at_one_byte_per_second_is_cut_at_the_total_deadline(
    herald: HeraldServer, tenant: Tenant
) -> None:
    event_type = unique("trickle")
    with RawListener(trickles_the_body, "trickle") as rx:
        subscribe(tenant, rx.url("/trickle"), event_type, RETRY_IN_10_MIN, timeout_ms=TIMEOUT_MS)
        message_id = publish_one(tenant, event_type)
        detail = wait_attempted(tenant, message_id, timeout=TIMEOUT_MS / 1000 + 20)
        closed = wait_until(lambda: first_conn(rx, "peer_closed_at"), 10, "herald to close the connection")
        conn = rx.connections()[0]

    attempt = detail["attempts"][0]
    held_open = closed - conn.accepted_at
    report("trickle", [
        f"attempt {summary(detail)} duration_ms {attempt['duration_ms']}; {conn.bytes_sent} body byte(s) trickled; "
        f"herald closed the connection after {held_open:.3f} s; state {detail['state']}"
    ])
    assert attempt["duration_ms"] <= TIMEOUT_MS * DEADLINE_SLACK, (
        f"one deadline for connect, headers and body: duration_ms {attempt['duration_ms']} > {TIMEOUT_MS} + 10 %"
    )
    assert held_open <= TIMEOUT_MS / 1000 * DEADLINE_SLACK + 0.5, f"herald held the connection {held_open:.3f} s"
    assert conn.bytes_sent <= TIMEOUT_MS / 1000 + 1, f"{conn.bytes_sent} bytes at 1 byte/s before the deadline"
    # The status line said 200, but the answer never finished in time: a timeout failure,
    # not a delivery.
    assert attempt["error_kind"] == "timeout", f"the body did not end in time: {shown(detail)}"
    assert attempt["outcome"] == "retryable", f"a timeout is a retryable failure, not a success: {shown(detail)}"
    assert_retry_scheduled(detail)


def test_a_one_gb_body_is_read_only_up_to_the_cap_with_bounded_memory(herald: HeraldServer, tenant: Tenant) -> None:
    event_type = unique("huge")
    policy = exponential(600, 600, max_attempts=3, retry_on="transient")
    with RawListener(sends_one_gb, "one-gb") as rx:
        subscribe(tenant, rx.url("/huge"), event_type, policy, timeout_ms=BODY_TIMEOUT_MS)
        before = memory_kb(herald)
        message_id = publish_one(tenant, event_type)
        detail = wait_attempted(tenant, message_id, timeout=BODY_TIMEOUT_MS / 1000 + 20)
        wait_until(lambda: first_conn(rx, "ended_at"), 15, "the 1 GB stream to end")
        after = memory_kb(herald)
        conn = rx.connections()[0]

    attempt = detail["attempts"][0]
    report("one-gb", [
        f"attempt {summary(detail)} duration_ms {attempt['duration_ms']}; state {detail['state']} "
        f"{detail['dead_reason']}; kept {len(attempt['response_body'] or '')} chars of body",
        f"the receiver pushed {conn.bytes_sent} of {ONE_GB} bytes before herald "
        f"{'closed the connection' if conn.peer_closed_at else 'stopped reading'}",
        f"herald memory before {before}, after {after} (kB)",
    ])
    assert_memory_bounded(before, after, "1 GB body")
    assert conn.bytes_sent < SENT_BYTES_BOUND, f"herald kept reading: {conn.bytes_sent} bytes taken"
    assert conn.peer_closed_at is not None, "herald drops the connection once it stops reading"
    assert attempt["duration_ms"] < BODY_TIMEOUT_MS, f"stopped by the cap, not the deadline: {shown(detail)}"
    assert len(attempt["response_body"] or "") <= KEPT_BODY_BYTES, "only the first 4 KiB of the answer is kept"
    assert attempt["status_code"] == 200, shown(detail)
    # Herald stopped reading at its cap, and the attempt says so; the 2xx status line had already
    # answered for the event (success is any 2xx), so nothing is sent again.
    assert attempt["error_kind"] == "body_too_large", f"reading stopped at the cap: {shown(detail)}"
    assert attempt["outcome"] == "success", f"a 2xx with a long body is delivered: {shown(detail)}"
    assert detail["state"] == "delivered", shown(detail)
    assert detail["attempt_count"] == 1 and len(rx.connections()) == 1, shown(detail)


def test_a_gzip_bomb_is_never_expanded_beyond_the_cap(herald: HeraldServer, tenant: Tenant) -> None:
    bomb = gzip_bomb()  # built before the measurement starts
    event_type = unique("bomb")
    with RawListener(sends_gzip_bomb, "gzip-bomb") as rx:
        policy = exponential(600, 600, max_attempts=1)
        subscribe(tenant, rx.url("/bomb"), event_type, policy, timeout_ms=BODY_TIMEOUT_MS)
        before = memory_kb(herald)
        message_id = publish_one(tenant, event_type)
        detail = wait_attempted(tenant, message_id, timeout=BODY_TIMEOUT_MS / 1000 + 20)
        wait_until(lambda: first_conn(rx, "ended_at"), 15, "the bomb's stream to end")
        after = memory_kb(herald)
        conn = rx.connections()[0]

    attempt = detail["attempts"][0]
    accept_encoding = [ln for ln in conn.head().split("\r\n") if ln.lower().startswith("accept-encoding")]
    report("gzip-bomb", [
        f"bomb {len(bomb)} bytes -> {GZIP_CHUNK * GZIP_CHUNKS} bytes; receiver pushed {conn.bytes_sent}; "
        f"herald's request said {accept_encoding or 'no accept-encoding'}",
        f"attempt {summary(detail)} duration_ms {attempt['duration_ms']}; "
        f"state {detail['state']} {detail['dead_reason']}",
        f"herald memory before {before}, after {after} (kB)",
    ])
    assert_memory_bounded(before, after, "gzip bomb")
    assert attempt["duration_ms"] < BODY_TIMEOUT_MS, f"stopped by the cap, not the deadline: {shown(detail)}"
    assert len(attempt["response_body"] or "") <= KEPT_BODY_BYTES, "only the first 4 KiB of the answer is kept"
    assert (attempt["status_code"], attempt["error_kind"]) == (503, "body_too_large"), shown(detail)
    assert attempt["outcome"] == "retryable", shown(detail)
    assert (detail["state"], detail["dead_reason"]) == ("dead", "attempts_exhausted"), shown(detail)


REDIRECTS = (301, 302, 303, 307, 308)


def test_redirects_are_not_followed_and_count_as_failures(herald: HeraldServer, tenant: Tenant) -> None:
    event_types = {code: unique(f"redirect-{code}") for code in REDIRECTS}
    with RawListener(canary, "redirect-canary", ipv6=True) as trap:
        with RawListener(redirects_to(lambda path: trap.url(f"/followed{path}")), "redirector") as rx:
            message_ids = {}
            for code in REDIRECTS:
                subscribe(tenant, rx.url(f"/redirect-{code}"), event_types[code], exponential(1, 1, max_attempts=2),
                          timeout_ms=TIMEOUT_MS)
            for code in REDIRECTS:
                message_ids[code] = publish_one(tenant, event_types[code])
            details = {code: wait_terminal(tenant, m, timeout=20) for code, m in message_ids.items()}
            requests_seen = sum(len(c.requests) for c in rx.connections())
        reached = trap.connections()

    report("redirect", [f"{code}: {summary(d)} {d['state']} {d['dead_reason']}" for code, d in details.items()]
           + [f"canary connections: {len(reached)}"])
    assert not reached, f"a redirect was followed to the canary: {[c.head() for c in reached]}"
    for code, detail in details.items():
        assert summary(detail) == [(1, code, None, "retryable"), (2, code, None, "retryable")], (
            f"{code} is recorded as a failure with its status, and retried by the policy: {shown(detail)}"
        )
        assert (detail["state"], detail["dead_reason"]) == ("dead", "attempts_exhausted"), shown(detail)
    assert requests_seen == 2 * len(REDIRECTS), f"two tries per message at the redirecting receiver: {requests_seen}"


@pytest.mark.parametrize("where", ["headers", "body"])
def test_a_connection_reset_mid_response_is_a_transport_error_and_the_message_is_retried(
    herald: HeraldServer, tenant: Tenant, where: str
) -> None:
    event_type = unique(f"reset-{where}")
    with RawListener(resets_mid_response(where), f"reset-{where}") as rx:
        subscribe(tenant, rx.url(f"/reset-{where}"), event_type, RETRY_IN_10_MIN, timeout_ms=TIMEOUT_MS)
        message_id = publish_one(tenant, event_type)
        detail = wait_attempted(tenant, message_id, timeout=20)
        conns = rx.connections()

    attempt = detail["attempts"][0]
    report(f"reset-{where}", [f"attempt {summary(detail)} duration_ms {attempt['duration_ms']}; state "
                              f"{detail['state']}; connections {len(conns)}"])
    assert attempt["error_kind"] in TRANSPORT_ERROR_KINDS, (
        f"a reset mid-{where} is a transport error ({sorted(TRANSPORT_ERROR_KINDS)}): {shown(detail)}"
    )
    assert attempt["outcome"] == "retryable", f"a reset answer is a failure to retry, not a success: {shown(detail)}"
    if where == "headers":
        assert attempt["status_code"] is None, f"no status line was completed: {shown(detail)}"
    assert_retry_scheduled(detail)


@pytest.mark.parametrize("retry_after", ["999999999", "Fri, 31 Dec 9999 23:59:59 GMT"])
def test_retry_after_far_in_the_future_is_clamped_to_the_policy(
    herald: HeraldServer, tenant: Tenant, receiver: Receiver, retry_after: str
) -> None:
    ttl = 4
    path, event_type = f"/{unique('throttled')}", unique("throttled")
    receiver.queue(path, Answer(429, {"retry-after": retry_after}))  # then 200
    # Without Retry-After the retry would come 1 s later; with it, as late as the TTL allows.
    subscribe(tenant, receiver.url(path), event_type, exponential(1, 1, max_attempts=5, ttl_secs=ttl))
    message_id = publish_one(tenant, event_type)

    first = wait_attempted(tenant, message_id, timeout=15)
    final = wait_terminal(tenant, message_id, timeout=ttl + 15)

    created = rfc3339(first["created_at"])
    attempt = first["attempts"][0]
    report("retry-after", [f"Retry-After {retry_after!r}: after the 429 the message was {first['state']} with "
                           f"next_attempt_at {first['next_attempt_at']} (created {first['created_at']}); "
                           f"finally {summary(final)} {final['state']} {final['dead_reason']}"])
    assert (attempt["number"], attempt["status_code"], attempt["outcome"]) == (1, 429, "retryable"), shown(first)
    assert first["state"] == "pending" and first["next_attempt_at"], f"the 429 is retried: {shown(first)}"
    next_at = rfc3339(first["next_attempt_at"])
    assert next_at <= created + timedelta(seconds=ttl + 1), (
        f"Retry-After is clamped to the policy's remaining time (TTL {ttl} s): next attempt at {next_at}, "
        f"created {created}"
    )
    assert next_at >= rfc3339(attempt["started_at"]) + timedelta(seconds=2), (
        f"…but honoured within it (the schedule alone would retry after 1 s): next at {next_at}"
    )
    # The message resolves by its TTL: a last try at the edge, or expiry.
    late = [a for a in final["attempts"][1:] if rfc3339(a["started_at"]) > created + timedelta(seconds=ttl + 1)]
    assert not late, f"no attempt after the TTL: {shown(final)}"
    assert final["state"] == "delivered" or final["dead_reason"] == "expired", shown(final)


# ---------------------------------------------------------------------------------------------
# 2. SSRF end to end

# Host spellings for http://<host>:<canary port>/…, and whether, with the guard off, the URL really
# connects to the canary on this kind of machine (127.0.0.1 and ::1 listeners on one port).
SSRF_TARGETS: list[tuple[str, bool]] = [
    ("127.0.0.1", True),
    ("127.1", True),
    ("2130706433", True),
    ("0x7f000001", True),
    ("0177.0.0.1", True),
    ("0x7f.1", True),
    ("017700000001", True),
    ("127.0.0.1.", True),
    ("%31%32%37.0.0.1", True),  # percent-encoded host
    ("0", True),
    ("0.0.0.0", True),
    ("[::1]", True),
    ("[::]", True),
    ("[::ffff:7f00:1]", True),
    ("[::ffff:127.0.0.1]", True),
    ("[0:0:0:0:0:ffff:7f00:1]", True),
    ("localhost", True),
    ("LOCALHOST", True),
    ("localhost.", False),  # RFC 6761: always loopback; whether the system resolver answers it varies
    ("[::127.0.0.1]", False),  # deprecated IPv4-compatible
    ("[64:ff9b::7f00:1]", False),  # NAT64 of 127.0.0.1
    ("[2002:7f00:1::]", False),  # 6to4 of 127.0.0.1
    ("10.0.0.1", False),
    ("172.16.0.1", False),
    ("192.168.0.1", False),
    ("100.100.100.200", False),  # CGNAT; Alibaba's metadata service
    ("169.254.169.254", False),  # cloud metadata
    ("[fe80::1]", False),
    ("[fd00:ec2::254]", False),  # AWS metadata over IPv6
]

V6_LOOPBACK = {"[::1]", "[::]"}


def is_url_problem(resp: Any) -> bool:
    if not 400 <= resp.status_code < 500 or "application/problem+json" not in resp.headers.get("content-type", ""):
        return False
    errors = resp.json().get("errors") or []
    return any(e.get("field") == "url" for e in errors)


def test_ssrf_no_spelling_of_a_private_address_reaches_the_canary(
    spawn_herald: Callable[..., HeraldServer], herald: HeraldServer
) -> None:
    guarded = spawn_herald("ssrf", env={"HERALD_ALLOW_PRIVATE_TARGETS": "false"})
    tenant = guarded.new_tenant("ssrf")
    event_type = "ssrf.probe"
    policy = exponential(1, 1, max_attempts=1)
    refused: dict[str, str] = {}
    accepted: dict[str, str] = {}  # subscription id -> host
    with RawListener(canary, "ssrf-canary", ipv6=True) as trap:
        for i, (host, _) in enumerate(SSRF_TARGETS):
            url = trap.url(f"/ssrf/{i}", host)
            body = {"name": f"ssrf {i}", "url": url, "event_types": [event_type], "retry_policy": policy,
                    "timeout_ms": TIMEOUT_MS}
            resp = tenant.client.post("/api/v1/subscriptions", json=body)
            if resp.status_code == 201:
                accepted[resp.json()["id"]] = host
            else:
                assert is_url_problem(resp), (
                    f"{url}: refused, so with a 4xx problem+json whose errors name `url`: {describe(resp)}"
                )
                refused[host] = "; ".join(e.get("message", "") for e in resp.json()["errors"])

        # An update cannot sneak a refused address in either.
        if refused and accepted:
            sub_id = next(iter(accepted))
            original = tenant.client.get(f"/api/v1/subscriptions/{sub_id}", expect=200).json()["url"]
            for host in refused:
                resp = tenant.client.patch(f"/api/v1/subscriptions/{sub_id}", json={"url": trap.url("/patched", host)})
                assert is_url_problem(resp), f"PATCH url to {host}: {describe(resp)}"
            current = tenant.client.get(f"/api/v1/subscriptions/{sub_id}", expect=200).json()["url"]
            assert current == original, f"a refused update changes nothing: {current!r} != {original!r}"

        blocked: dict[str, dict] = {}
        if accepted:
            message_ids = publish(tenant, event_type)
            assert len(message_ids) == len(accepted), f"one message per accepted subscription: {message_ids}"
            for message_id in message_ids:
                detail = wait_terminal(tenant, message_id, timeout=20)
                blocked[accepted[detail["subscription_id"]]] = detail
        reached = trap.connections()

        report("ssrf", [
            f"canary port {trap.port} (IPv6 listener: {trap.ipv6}); {len(SSRF_TARGETS)} spellings",
            f"refused at creation ({len(refused)}): {sorted(refused)}",
            f"blocked at delivery ({len(blocked)}): "
            + ", ".join(f"{h} -> {summary(d)} {d['state']} {d['dead_reason']}" for h, d in blocked.items()),
            f"connections that reached the canary: {len(reached)}",
        ])
        assert not reached, f"{len(reached)} connection(s) reached the canary: {[(c.peer, c.head()) for c in reached]}"

        # The control: with private targets allowed (the session's herald), the loopback spellings
        # do reach this canary — so the zero above is the guard's doing.
        control_hosts = [h for h, reaches in SSRF_TARGETS if reaches and (trap.ipv6 or h not in V6_LOOPBACK)]
        control = herald.new_tenant("ssrf-control")
        control_type = unique("ssrf.control")
        for i, host in enumerate(control_hosts):
            subscribe(control, trap.url(f"/control/{i}", host), control_type, policy, timeout_ms=TIMEOUT_MS)
        outcomes = {}
        for message_id in publish(control, control_type):
            detail = wait_terminal(control, message_id, timeout=20)
            outcomes[detail["subscription_id"]] = detail
        not_delivered = [shown(d) for d in outcomes.values() if d["state"] != "delivered"]
        assert not not_delivered, (
            f"control: with private targets allowed these should reach the canary: {not_delivered}"
        )
        assert trap.count() == len(control_hosts), (
            f"control: {len(control_hosts)} spellings, {trap.count()} canary connections"
        )

    assert len(refused) + len(blocked) == len(SSRF_TARGETS)
    wrong = {
        h: summary(d)
        for h, d in blocked.items()
        if not (d["state"] == "dead" and summary(d) == [(1, None, "blocked_target", "permanent")])
    }
    assert not wrong, (
        f"accepted spellings must end dead with one `blocked_target` attempt; these did not: {wrong}\n"
        + "\n".join(f"{h}: {shown(blocked[h])}" for h in wrong)
        + "\nherald log:\n"
        + log_lines(guarded, *(d["id"] for h, d in blocked.items() if h in wrong))
    )
    assert all(d["dead_reason"] == "non_retryable" for d in blocked.values()), [
        (h, d["dead_reason"]) for h, d in blocked.items()
    ]
