//! The request Herald sends (README, "What a receiver gets"): the CloudEvent in the subscription's
//! content mode, the Standard Webhooks headers, and the subscription's extra headers and
//! credentials (an OAuth 2.0 token is added by the delivery, which may have to fetch it).

use std::time::Duration;

use domain::event::CloudEvent;
use domain::signing::signature_header;
use domain::states::ContentMode;
use domain::trace::MessageTrace;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};

use super::credentials::{Authorization, Keys};
use super::http::Outgoing;
use crate::store::entities::subscription;

static WEBHOOK_ID: HeaderName = HeaderName::from_static("webhook-id");
static WEBHOOK_TIMESTAMP: HeaderName = HeaderName::from_static("webhook-timestamp");
static WEBHOOK_SIGNATURE: HeaderName = HeaderName::from_static("webhook-signature");
static TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
static TRACESTATE: HeaderName = HeaderName::from_static("tracestate");

/// The request for a stored event (`payload`, as the publish stored it), in `trace` as the
/// span `span_id`; `None` when the binary mode cannot read it back, or finds an attribute no
/// header can carry (the publish refuses both).
pub fn build(
    sub: &subscription::Model,
    keys: &Keys,
    payload: &str,
    message_id: &str,
    now_ms: i64,
    (trace, span_id): (&MessageTrace, [u8; 8]),
) -> Option<Outgoing> {
    let mut headers = HeaderMap::with_capacity(10 + keys.headers().len());
    let body = match sub.content_mode {
        ContentMode::Binary => {
            let event = serde_json::from_str(payload).ok().and_then(CloudEvent::from_stored)?;
            let binary = event.binary();
            for (name, value) in binary.headers {
                headers.append(HeaderName::from_bytes(name.as_bytes()).ok()?, HeaderValue::try_from(value).ok()?);
            }
            if !binary.content_type.is_empty() {
                headers.insert(CONTENT_TYPE, HeaderValue::try_from(binary.content_type).ok()?);
            }
            binary.body
        }
        // The stored payload is the event serialized as `CloudEvent::stored_text` does it:
        // sent as it is, without reading it back and writing it again.
        ContentMode::Structured => {
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/cloudevents+json"));
            payload.as_bytes().to_vec()
        }
    };
    let timestamp = now_ms.div_euclid(1000);
    let signature = signature_header(keys.iter(), message_id, timestamp, &body);
    headers.insert(WEBHOOK_ID.clone(), HeaderValue::from_str(message_id).ok()?);
    headers.insert(WEBHOOK_TIMESTAMP.clone(), HeaderValue::from(timestamp));
    headers.insert(WEBHOOK_SIGNATURE.clone(), HeaderValue::try_from(signature).ok()?);
    headers.insert(TRACEPARENT.clone(), HeaderValue::try_from(trace.traceparent(span_id)).ok()?);
    if let Some(state) = &trace.state {
        headers.insert(TRACESTATE.clone(), HeaderValue::try_from(state.as_str()).ok()?);
    }
    // Their names are none of the above (the subscription's rules refuse those).
    for (name, value) in keys.headers() {
        headers.insert(name.clone(), value.clone());
    }
    if let Authorization::Header(value) = keys.authorization() {
        headers.insert(AUTHORIZATION, value.clone());
    }
    Some(Outgoing { headers, body, timeout: Duration::from_millis(sub.timeout_ms.max(1) as u64) })
}
