//! Spans of publishes and attempts, exported over OTLP/HTTP when `otlp_endpoint` is set
//! (docs/operations.md, "Traces"). Herald chooses its spans' ids itself (the ids its requests carry, see
//! `domain::trace`), so each span is handed to the SDK's batch processor finished: no
//! tracer or context runs on the hot path. The processor exports from a thread of its own
//! and drops spans rather than wait when its queue is full; without an endpoint, none of
//! this exists.

use std::borrow::Cow;
use std::time::{Duration, UNIX_EPOCH};

use domain::trace::{EventTrace, MessageTrace, SAMPLED, own_trace_id, publish_span_id};
use opentelemetry::trace::{Link, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{BatchSpanProcessor, SpanData, SpanEvents, SpanLinks, SpanProcessor};

use super::send::http::Received;
use crate::ids::id_bits;
use crate::store::entities::{event, message};

/// Where spans go: the collector's `/v1/traces`.
pub struct Spans {
    processor: BatchSpanProcessor,
    scope: InstrumentationScope,
}

/// An attempt as its span tells it.
pub struct AttemptSpan<'a> {
    pub message: &'a message::Model,
    pub event: &'a event::Model,
    pub trace: &'a MessageTrace,
    pub span_id: [u8; 8],
    pub url: &'a str,
    pub started_ms: i64,
    pub received: &'a Received,
    pub outcome: &'static str,
}

impl Spans {
    /// `endpoint` is the collector's base URL (`http://host:4318`), or its full `/v1/traces` URL.
    pub fn start(endpoint: &str) -> Result<Spans, String> {
        let base = endpoint.trim_end_matches('/');
        let url = if base.ends_with("/v1/traces") { base.to_string() } else { format!("{base}/v1/traces") };
        crate::tls::install_provider();
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_endpoint(url)
            .with_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| e.to_string())?;
        let mut processor = BatchSpanProcessor::builder(exporter).build();
        processor.set_resource(&Resource::builder().with_service_name("herald").build());
        let scope = InstrumentationScope::builder("herald").with_version(env!("CARGO_PKG_VERSION")).build();
        Ok(Spans { processor, scope })
    }

    /// The publish of a stored event, from the batch's start to its commit (unix milliseconds).
    /// An event published in a trace is a child of the publisher's span; otherwise it starts a
    /// trace of its own, named by the event's id.
    pub fn publish(&self, row: &event::Model, started_ms: i64, ended_ms: i64) {
        let Some(event_id) = id_bits(&row.id) else { return };
        let span_id = SpanId::from_bytes(publish_span_id(event_id));
        let (context, parent) = match EventTrace::of_stored(&row.payload) {
            Some(trace) => (
                context(trace.parent.trace_id, span_id, trace.parent.flags, trace.state.as_deref()),
                Some(SpanId::from_bytes(trace.parent.parent_id)),
            ),
            None => (context(own_trace_id(event_id), span_id, SAMPLED, None), None),
        };
        let messages = row.message_id_list().len() as i64;
        let attributes = vec![
            KeyValue::new("herald.event_id", row.id.to_string()),
            KeyValue::new("herald.customer_id", row.customer_id.to_string()),
            KeyValue::new("herald.messages", messages),
            KeyValue::new("cloudevents.event_id", row.ce_id.clone()),
            KeyValue::new("cloudevents.event_source", row.source.clone()),
            KeyValue::new("cloudevents.event_type", row.event_type.clone()),
        ];
        self.end(SpanData {
            span_context: context,
            parent_span_id: parent.unwrap_or(SpanId::INVALID),
            parent_span_is_remote: parent.is_some(),
            span_kind: SpanKind::Producer,
            name: Cow::Borrowed("publish"),
            start_time: at(started_ms),
            end_time: at(ended_ms.max(started_ms)),
            attributes,
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: Status::Ok,
            instrumentation_scope: self.scope.clone(),
        });
    }

    /// One request to a receiver. In the message's own trace, it links to the event's publish.
    pub fn attempt(&self, a: AttemptSpan<'_>) {
        let trace = a.trace;
        let span_context = context(trace.trace_id, SpanId::from_bytes(a.span_id), trace.flags, trace.state.as_deref());
        let mut links = SpanLinks::default();
        if trace.parent_id.is_none()
            && let Some(event_id) = id_bits(&a.event.id)
        {
            let publish = context(own_trace_id(event_id), SpanId::from_bytes(publish_span_id(event_id)), SAMPLED, None);
            links.links.push(Link::with_context(publish));
        }
        let mut attributes = vec![
            KeyValue::new("http.request.method", "POST"),
            KeyValue::new("herald.message_id", a.message.id.to_string()),
            KeyValue::new("herald.attempt", i64::from(a.message.attempt_count) + 1),
            KeyValue::new("herald.outcome", a.outcome),
            KeyValue::new("herald.subscription_id", a.message.subscription_id.to_string()),
            KeyValue::new("herald.event_id", a.event.id.to_string()),
            KeyValue::new("cloudevents.event_type", a.event.event_type.clone()),
        ];
        // The receiver's host, not its URL: a webhook URL often carries a secret in its path or query.
        if let Ok(url) = url::Url::parse(a.url) {
            if let Some(host) = url.host_str() {
                attributes.push(KeyValue::new("server.address", host.to_string()));
            }
            if let Some(port) = url.port_or_known_default() {
                attributes.push(KeyValue::new("server.port", i64::from(port)));
            }
        }
        let received = a.received;
        if let Some(status) = received.status {
            attributes.push(KeyValue::new("http.response.status_code", i64::from(status)));
        }
        let status = match (&received.error, received.status) {
            (Some((kind, detail)), _) => {
                attributes.push(KeyValue::new("error.type", kind.as_str()));
                Status::error(detail.clone())
            }
            (None, Some(code)) if !(200..300).contains(&code) => {
                attributes.push(KeyValue::new("error.type", code.to_string()));
                Status::error(format!("HTTP {code}"))
            }
            _ => Status::Ok,
        };
        self.end(SpanData {
            span_context,
            parent_span_id: trace.parent_id.map(SpanId::from_bytes).unwrap_or(SpanId::INVALID),
            parent_span_is_remote: false,
            span_kind: SpanKind::Client,
            name: Cow::Borrowed("POST"),
            start_time: at(a.started_ms),
            end_time: at(a.started_ms) + Duration::from_millis(received.duration_ms),
            attributes,
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links,
            status,
            instrumentation_scope: self.scope.clone(),
        });
    }

    /// Sends what is queued and waits for the collector's answer (blocking).
    pub fn flush(&self) {
        if let Err(e) = self.processor.force_flush() {
            tracing::warn!(error = %e, "exporting spans failed");
        }
    }

    /// Sends what is queued and stops the exporting thread (blocking).
    pub fn shutdown(&self) {
        if let Err(e) = self.processor.shutdown() {
            tracing::warn!(error = %e, "exporting the last spans failed");
        }
    }

    /// A span the publisher chose not to sample is not exported.
    fn end(&self, span: SpanData) {
        if span.span_context.is_sampled() {
            self.processor.on_end(span);
        }
    }
}

fn context(trace_id: [u8; 16], span_id: SpanId, flags: u8, state: Option<&str>) -> SpanContext {
    let state = state.and_then(|s| s.parse::<TraceState>().ok()).unwrap_or_default();
    SpanContext::new(TraceId::from_bytes(trace_id), span_id, TraceFlags::new(flags), false, state)
}

fn at(ms: i64) -> std::time::SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64)
}
