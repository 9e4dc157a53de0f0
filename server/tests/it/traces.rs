//! Trace context across the hop: every request carries a `traceparent` (the publisher's trace,
//! or the message's own), the attempt records its trace id, and with `otlp_endpoint` set the
//! publish and attempt spans reach an OTLP/HTTP collector with the ids the requests carried.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use domain::trace::{TraceParent, hex, publish_span_id};
use herald::ids::id_bits;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::{Value, json};

use crate::common::{TestApp, TestReceiver};

const PUBLISHER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const PUBLISHER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

/// Publishes `id`, in the publisher's trace when `traced`; returns the event's first message id.
async fn publish(app: &TestApp, key: &str, id: &str, traced: bool) -> String {
    let mut event = json!({"specversion": "1.0", "id": id, "source": "/shop", "type": "order.created", "data": {}});
    if traced {
        event["traceparent"] = json!(PUBLISHER);
        event["tracestate"] = json!("shop=7");
    }
    let (status, body) = app.post("/api/v1/events", key, event).await;
    assert_eq!(status, 202, "{body}");
    body["events"][0]["message_ids"][0].as_str().unwrap().to_string()
}

/// The trace id a message of an event without a trace is sent in: its id's 128 bits.
fn own_trace(message_id: &str) -> String {
    hex(&id_bits(message_id).unwrap())
}

async fn subscribe(app: &TestApp, key: &str, url: &str) {
    let policy = json!({"kind": "exponential", "min_delay_secs": 1, "max_delay_secs": 1, "max_attempts": 5});
    app.subscribe(key, json!({"name": "s", "url": url, "event_types": ["*"], "retry_policy": policy})).await;
}

#[tokio::test]
async fn every_request_carries_the_publishers_trace_or_the_messages_own_and_the_attempt_records_it() {
    let app = TestApp::start().await;
    assert!(app.services.pipeline.spans.is_none(), "nothing is exported without otlp_endpoint");
    let rx = TestReceiver::start().await;
    let (_, key) = app.customer("acme").await;
    subscribe(&app, &key, &rx.url).await;
    let traced = publish(&app, &key, "traced", true).await;
    let fresh = publish(&app, &key, "fresh", false).await;
    rx.answer(503);
    assert_eq!(app.deliver_fresh().await, 2);
    app.advance_secs(1.0);
    assert_eq!(app.deliver_retries().await, 1, "the first message's retry");

    let seen = rx.seen();
    let of = |message: &str| -> Vec<TraceParent> {
        seen.iter()
            .filter(|r| r.header("webhook-id") == message)
            .map(|r| TraceParent::parse(r.header("traceparent")).expect("a valid traceparent"))
            .collect()
    };
    let (traced_sent, fresh_sent) = (of(&traced), of(&fresh));
    assert_eq!((traced_sent.len(), fresh_sent.len()), (2, 1));
    for sent in &traced_sent {
        assert_eq!((hex(&sent.trace_id).as_str(), sent.flags), (PUBLISHER_TRACE, 1), "the publisher's trace");
        assert_ne!(hex(&sent.parent_id), "00f067aa0ba902b7", "a span of Herald's, not the publisher's");
    }
    assert_ne!(traced_sent[0].parent_id, traced_sent[1].parent_id, "each attempt is a span of its own");
    assert_eq!((hex(&fresh_sent[0].trace_id), fresh_sent[0].flags), (own_trace(&fresh), 1));
    let tracestates: Vec<&str> = seen.iter().map(|r| r.header("tracestate")).collect();
    assert_eq!(tracestates.iter().filter(|s| **s == "shop=7").count(), 2, "passed on with the publisher's trace");
    assert_eq!(tracestates.iter().filter(|s| s.is_empty()).count(), 1);

    let detail = app.message(&key, &traced).await;
    let attempts = detail["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2);
    for (attempt, sent) in attempts.iter().zip(&traced_sent) {
        assert_eq!(attempt["trace_id"], PUBLISHER_TRACE);
        assert_eq!(attempt["request_headers"]["traceparent"], sent.header());
    }
    let detail = app.message(&key, &fresh).await;
    assert_eq!(detail["attempts"][0]["trace_id"], Value::String(own_trace(&fresh)));
}

#[tokio::test]
async fn attempts_are_counted_by_outcome_and_class() {
    let app = TestApp::start().await;
    let rx = TestReceiver::start().await;
    let (_, key) = app.customer("acme").await;
    subscribe(&app, &key, &rx.url).await;
    let attempts = |text: &str| -> Vec<String> {
        text.lines().filter(|l| l.starts_with("herald_attempts_total{")).map(str::to_string).collect()
    };
    let series = |text: &str, outcome: &str, class: &str| {
        let (outcome, class) = (format!("outcome=\"{outcome}\""), format!("class=\"{class}\""));
        let line = attempts(text).into_iter().find(|l| l.contains(&outcome) && l.contains(&class));
        line.and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).unwrap_or(0.0)
    };
    let metrics = || async { reqwest::get(format!("{}/metrics", app.base)).await.unwrap().text().await.unwrap() };
    let before = metrics().await;
    rx.answer(503);
    publish(&app, &key, "e1", false).await;
    app.deliver_fresh().await;
    app.advance_secs(1.0);
    app.deliver_retries().await;
    let after = metrics().await;
    for (outcome, class) in [("retryable", "5xx"), ("success", "2xx")] {
        let counted = series(&after, outcome, class) - series(&before, outcome, class);
        assert!(counted >= 1.0, "{outcome} {class}:\n{after}");
    }
    assert!(attempts(&after).iter().all(|l| l.contains("class=\"")), "every series has its class:\n{after}");
}

/// An OTLP/HTTP collector on 127.0.0.1:0 that keeps every export request's spans.
async fn collector() -> (String, Arc<Mutex<Vec<Span>>>) {
    let spans = Arc::new(Mutex::new(Vec::new()));
    let kept = spans.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: Bytes| {
            let kept = kept.clone();
            async move {
                let request = ExportTraceServiceRequest::decode(body).expect("an OTLP protobuf request");
                for resource in request.resource_spans {
                    let service =
                        resource.resource.iter().flat_map(|r| &r.attributes).find(|a| a.key == "service.name");
                    assert!(format!("{service:?}").contains("herald"), "{service:?}");
                    kept.lock().unwrap().extend(resource.scope_spans.into_iter().flat_map(|s| s.spans));
                }
                ([("content-type", "application/x-protobuf")], Vec::<u8>::new())
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, spans)
}

#[tokio::test]
async fn publish_and_attempt_spans_reach_the_collector_with_the_ids_the_requests_carried() {
    let (endpoint, exported) = collector().await;
    let app = TestApp::start_with(|s| s.otlp_endpoint = Some(endpoint)).await;
    let rx = TestReceiver::start().await;
    let (_, key) = app.customer("acme").await;
    subscribe(&app, &key, &rx.url).await;
    let traced = publish(&app, &key, "traced", true).await;
    let fresh = publish(&app, &key, "fresh", false).await;
    assert_eq!(app.deliver_fresh().await, 2);
    let spans = app.services.pipeline.spans.clone().expect("spans are exported");
    tokio::task::spawn_blocking(move || spans.flush()).await.unwrap();

    let exported = exported.lock().unwrap().clone();
    let named = |name: &str, trace: &str| -> Vec<Span> {
        exported.iter().filter(|s| s.name == name && hex(&s.trace_id) == trace).cloned().collect()
    };
    let traced_event = app.message(&key, &traced).await["event_id"].as_str().unwrap().to_string();
    let fresh_event = app.message(&key, &fresh).await["event_id"].as_str().unwrap().to_string();
    let request_of = |message: &str| {
        let seen = rx.seen();
        let request = seen.iter().find(|r| r.header("webhook-id") == message).expect("delivered");
        TraceParent::parse(request.header("traceparent")).unwrap()
    };

    // The publisher's trace: its span → Herald's publish → the attempt → the receiver.
    let publish = named("publish", PUBLISHER_TRACE);
    assert_eq!(publish.len(), 1, "{exported:#?}");
    let publish_id = publish_span_id(id_bits(&traced_event).unwrap());
    assert_eq!(
        (publish[0].span_id.as_slice(), hex(&publish[0].parent_span_id)),
        (&publish_id[..], "00f067aa0ba902b7".into())
    );
    let attempt = named("POST", PUBLISHER_TRACE);
    assert_eq!(attempt.len(), 1);
    assert_eq!(attempt[0].parent_span_id, publish_id);
    assert_eq!(attempt[0].span_id, request_of(&traced).parent_id, "the span the receiver's request names");
    assert!(attempt[0].attributes.iter().any(|a| a.key == "http.response.status_code"));
    assert_eq!(attempt[0].trace_state, "shop=7");

    // An event without a trace: its publish starts one, and its message's attempt, in the
    // message's own trace, links to it.
    let fresh_publish = named("publish", &hex(&id_bits(&fresh_event).unwrap()));
    assert_eq!(fresh_publish.len(), 1);
    assert!(fresh_publish[0].parent_span_id.is_empty(), "a root");
    let fresh_attempt = named("POST", &own_trace(&fresh));
    assert_eq!(fresh_attempt.len(), 1);
    assert!(fresh_attempt[0].parent_span_id.is_empty());
    assert_eq!(fresh_attempt[0].span_id, request_of(&fresh).parent_id);
    let link = &fresh_attempt[0].links[0];
    assert_eq!((&link.trace_id, &link.span_id), (&fresh_publish[0].trace_id, &fresh_publish[0].span_id));
    assert_eq!(exported.len(), 4, "two publishes, two attempts: {exported:#?}");
}
