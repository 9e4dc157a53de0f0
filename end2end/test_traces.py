"""Trace context across the hop, as a receiver and a collector see it: Herald started with
`HERALD_OTLP_ENDPOINT` pointing at a local OTLP/HTTP collector (a real HTTP server decoding the
protobuf requests with the OpenTelemetry project's own message definitions), a receiver that reads
each delivery's `traceparent`, one event published in the publisher's trace and one without.
Stopping Herald (SIGTERM) sends the spans still queued before it exits.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from conftest import SpawnHerald
from harness import cloud_event, unique, wait_until
from webhook_receiver import Receiver

PUBLISHER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PUBLISHER_SPAN = "00f067aa0ba902b7"
CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def ulid_hex(prefixed_id: str) -> str:
    """The 128 bits of a prefixed ULID id (`msg_01J…`) as 32 hex digits."""
    value = 0
    for char in prefixed_id.split("_", 1)[1].upper():
        value = value * 32 + CROCKFORD.index(char)
    return f"{value:032x}"


def traceparent(header: str) -> tuple[str, str, str]:
    version, trace_id, span_id, flags = header.split("-")
    assert version == "00" and len(trace_id) == 32 and len(span_id) == 16 and len(flags) == 2, header
    return trace_id, span_id, flags


@contextmanager
def collector() -> Iterator[tuple[str, list[Any]]]:
    """An OTLP/HTTP collector on loopback; yields its base URL and the spans it received."""
    spans: list[Any] = []
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - stdlib name
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            assert self.path == "/v1/traces", self.path
            assert self.headers.get("content-type") == "application/x-protobuf"
            request = ExportTraceServiceRequest.FromString(body)
            with lock:
                for resource in request.resource_spans:
                    names = {a.key: a.value.string_value for a in resource.resource.attributes}
                    assert names.get("service.name") == "herald", names
                    for scope in resource.scope_spans:
                        spans.extend(scope.spans)
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", spans
    finally:
        server.shutdown()
        server.server_close()


def test_deliveries_carry_the_trace_and_the_spans_reach_the_collector(spawn_herald: SpawnHerald) -> None:
    with collector() as (endpoint, spans), Receiver() as receiver:
        herald = spawn_herald("traces", env={"HERALD_OTLP_ENDPOINT": endpoint})
        tenant = herald.new_tenant("traces")
        event_type = unique("traces")
        body = {"name": "traces", "url": receiver.url("/hook"), "event_types": [event_type]}
        tenant.client.post("/api/v1/subscriptions", json=body, expect=201)
        traced = cloud_event(
            unique("traced"), event_type, traceparent=f"00-{PUBLISHER_TRACE}-{PUBLISHER_SPAN}-01", tracestate="shop=7"
        )
        published = tenant.client.publish([traced, cloud_event(unique("fresh"), event_type)]).json()["events"]
        traced_message, fresh_message = (e["message_ids"][0] for e in published)
        requests = {r.headers["webhook-id"]: r for r in receiver.wait_for_count(2)}

        # Propagated: the publisher's trace, a span of Herald's, the tracestate passed on.
        trace_id, attempt_span, flags = traceparent(requests[traced_message].headers["traceparent"])
        assert (trace_id, flags) == (PUBLISHER_TRACE, "01")
        assert attempt_span != PUBLISHER_SPAN
        assert requests[traced_message].headers.get("tracestate") == "shop=7"
        # Fresh: a trace of the message's own, named by its id.
        fresh_trace, fresh_span, _ = traceparent(requests[fresh_message].headers["traceparent"])
        assert fresh_trace == ulid_hex(fresh_message)
        assert "tracestate" not in requests[fresh_message].headers
        # The receiver answers before the attempt is written (records are group-committed).
        attempts = wait_until(
            lambda: tenant.client.get(f"/api/v1/messages/{fresh_message}").json()["attempts"],
            10.0,
            "the fresh message's attempt recorded",
        )
        assert attempts[0]["trace_id"] == fresh_trace

        herald.stop()  # the last spans leave before the process exits
        wait_until(lambda: len(spans) >= 4, 10.0, "two publish and two attempt spans at the collector")
        by_trace: dict[str, list[Any]] = {}
        for span in spans:
            by_trace.setdefault(span.trace_id.hex(), []).append(span)
        publish = next(s for s in by_trace[PUBLISHER_TRACE] if s.name == "publish")
        attempt = next(s for s in by_trace[PUBLISHER_TRACE] if s.name == "POST")
        assert publish.parent_span_id.hex() == PUBLISHER_SPAN
        assert (attempt.span_id.hex(), attempt.parent_span_id) == (attempt_span, publish.span_id)
        fresh_attempt = next(s for s in by_trace[fresh_trace] if s.name == "POST")
        assert fresh_attempt.span_id.hex() == fresh_span
        attributes = {a.key: a.value for a in fresh_attempt.attributes}
        assert attributes["http.response.status_code"].int_value == 200
        assert attributes["herald.message_id"].string_value == fresh_message
