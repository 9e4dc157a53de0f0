"""The webhook receiver of Herald's black-box tests: a real local HTTP server that records every
request and answers as each test scripts it.

By default every path answers 200. A test can script a path: a queue of one-shot answers
(`receiver.queue(path, 503, 503)`), then a standing answer once the queue is used up
(`receiver.answer(path, Answer(429, {"retry-after": "3"}))`). An answer may come after a delay, or
never (`Answer(hang=True)`: the connection is held open, unanswered, until the receiver stops), which
makes the path a blackhole. Nothing here sleeps a fixed time to wait for something: every wait is on
a condition with a deadline.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

from harness import DELIVERY_TIMEOUT

T = TypeVar("T")


@dataclass(frozen=True)
class Answer:
    """How the receiver answers one request."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b"ok"
    delay: float = 0.0  # seconds between receiving the request and answering it
    hang: bool = False  # never answer: hold the connection open until the receiver stops


OK = Answer()


def as_answer(answer: int | Answer) -> Answer:
    return answer if isinstance(answer, Answer) else Answer(status=answer)


@dataclass(frozen=True)
class ReceivedRequest:
    method: str
    path: str
    headers: dict[str, str]  # lowercase names
    body: bytes
    received_at: float  # time.time()
    received_monotonic: float  # time.monotonic(), comparable with the test's own clock
    answer: Answer = OK  # what the receiver answered (or, for a hang, never answered)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # Herald opens up to its per-endpoint concurrency (32) connections at once: the stdlib's
    # backlog of 5 would drop SYNs and turn that burst into connect retries.
    request_queue_size = 256

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A sender that went away mid-request (a timeout, a killed herald) is not the receiver's
        # error: say nothing. Anything else gets the stdlib's traceback.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class Receiver:
    """An HTTP server on 127.0.0.1:<random port> that records every request and answers it as
    scripted for its path (200 when nothing is scripted)."""

    def __init__(self) -> None:
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._requests: list[ReceivedRequest] = []
        self._cond = threading.Condition()
        self._queued: dict[str, deque[Answer]] = {}
        self._standing: dict[str, Answer] = {}
        self._stopping = threading.Event()

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real receivers do

            def _handle(self) -> None:
                body = self._read_body()
                headers: dict[str, str] = {}
                for name, value in self.headers.items():
                    key = name.lower()
                    headers[key] = f"{headers[key]}, {value}" if key in headers else value
                request = ReceivedRequest(
                    method=self.command,
                    path=self.path,
                    headers=headers,
                    body=body,
                    received_at=time.time(),
                    received_monotonic=time.monotonic(),
                )
                answer = receiver._record(request)
                if answer.hang:
                    receiver._stopping.wait()
                    self.close_connection = True
                    return
                if answer.delay > 0 and receiver._stopping.wait(answer.delay):
                    self.close_connection = True
                    return
                self.send_response(answer.status)
                self.send_header("content-type", "text/plain")
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(answer.body)))
                self.end_headers()
                self.wfile.write(answer.body)

            def _read_body(self) -> bytes:
                if "chunked" in self.headers.get("transfer-encoding", "").lower():
                    chunks = []
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass  # trailers
                            return b"".join(chunks)
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                length = int(self.headers.get("content-length") or 0)
                return self.rfile.read(length) if length else b""

            do_POST = do_PUT = do_PATCH = do_GET = do_DELETE = _handle

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
                pass

        self._stopping.clear()
        self._server = _Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="receiver", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # releases hung and delayed answers
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> Receiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- scripting ---------------------------------------------------------------------------

    def queue(self, path: str, *answers: int | Answer) -> None:
        """Answer the next requests to `path` with `answers`, one each, in order (a status code
        stands for `Answer(status)`); after them the path's standing answer applies again."""
        with self._cond:
            self._queued.setdefault(path, deque()).extend(as_answer(a) for a in answers)

    def answer(self, path: str, answer: int | Answer) -> None:
        """Answer every request to `path` with `answer` once its queue is used up."""
        with self._cond:
            self._standing[path] = as_answer(answer)

    def _record(self, request: ReceivedRequest) -> Answer:
        with self._cond:
            queued = self._queued.get(request.path)
            answer = queued.popleft() if queued else self._standing.get(request.path, OK)
            self._requests.append(
                ReceivedRequest(
                    method=request.method,
                    path=request.path,
                    headers=request.headers,
                    body=request.body,
                    received_at=request.received_at,
                    received_monotonic=request.received_monotonic,
                    answer=answer,
                )
            )
            self._cond.notify_all()
            return answer

    # -- what arrived --------------------------------------------------------------------------

    @property
    def port(self) -> int:
        assert self._server is not None, "receiver not started"
        return self._server.server_address[1]

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    @property
    def requests(self) -> list[ReceivedRequest]:
        """A snapshot of every request so far, in arrival order."""
        with self._cond:
            return list(self._requests)

    def count(self) -> int:
        with self._cond:
            return len(self._requests)

    def on_path(self, path: str) -> list[ReceivedRequest]:
        return [r for r in self.requests if r.path == path]

    def wait_for(
        self,
        predicate: Callable[[list[ReceivedRequest]], T],
        timeout: float = DELIVERY_TIMEOUT,
        description: str = "the receiver's condition",
    ) -> T:
        """Wait (woken by each arrival, and re-checked at least every 0.1 s) until
        `predicate(requests)` is truthy; return its value, or raise TimeoutError at the deadline."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                result = predicate(list(self._requests))
                if result:
                    return result
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(
                        f"timed out after {timeout:.0f}s waiting for {description}; "
                        f"{len(self._requests)} request(s) received: "
                        + ", ".join(f"{r.method} {r.path}" for r in self._requests[-10:])
                    )
                self._cond.wait(min(remaining, 0.1))

    def wait_for_count(self, n: int, timeout: float = DELIVERY_TIMEOUT) -> list[ReceivedRequest]:
        return self.wait_for(lambda reqs: reqs if len(reqs) >= n else None, timeout, f"{n} request(s)")

    def wait_for_path(self, path: str, n: int, timeout: float = DELIVERY_TIMEOUT) -> list[ReceivedRequest]:
        """Wait until `path` has at least `n` requests; return them all."""

        def enough(reqs: list[ReceivedRequest]) -> list[ReceivedRequest] | None:
            mine = [r for r in reqs if r.path == path]
            return mine if len(mine) >= n else None

        return self.wait_for(enough, timeout, f"{n} request(s) to {path}")

    def assert_quiet(self, path: str, seconds: float) -> None:
        """Watch `path` for `seconds` and fail if any request to it arrives in that time."""
        before = len(self.on_path(path))
        try:
            late = self.wait_for(
                lambda reqs: [r for r in reqs if r.path == path][before:], seconds, f"a request to {path}"
            )
        except TimeoutError:
            return
        raise AssertionError(
            f"{path} should receive nothing for {seconds:.1f}s, but got {len(late)} more request(s) "
            f"(webhook-ids {[r.headers.get('webhook-id') for r in late]})"
        )
