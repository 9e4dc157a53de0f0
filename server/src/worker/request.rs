//! The request Herald sends (SPEC §3): the CloudEvent in the subscription's
//! content mode, and the Standard Webhooks headers.

use std::time::Duration;

use app::domain::event::CloudEvent;
use app::domain::signing::{secret_key, signature_header};
use app::domain::states::ContentMode;

use super::http::Outgoing;
use crate::secrets::Sealer;
use crate::store::entities::subscription;

/// Every secret still valid at `now_ms`, opened: the current one, and the previous one during a
/// rotation's overlap.
fn signing_keys(sub: &subscription::Model, sealer: &Sealer, now_ms: i64) -> Vec<Vec<u8>> {
    let previous =
        sub.previous_secret.as_deref().filter(|_| sub.previous_secret_expires_at.is_some_and(|until| until > now_ms));
    std::iter::once(sub.secret.as_str())
        .chain(previous)
        .filter_map(|sealed| match sealer.open(sealed, &sub.id) {
            Ok(secret) => secret_key(&secret),
            Err(e) => {
                tracing::error!(subscription_id = %sub.id, error = %e, "a signing secret did not open");
                None
            }
        })
        .collect()
}

/// The request for a stored event (`payload`, as the publish stored it); `None`
/// when the binary mode cannot read it back.
pub fn build(
    sub: &subscription::Model,
    sealer: &Sealer,
    payload: &str,
    message_id: &str,
    now_ms: i64,
) -> Option<Outgoing> {
    let (mut headers, body) = match ContentMode::parse(&sub.content_mode) {
        Some(ContentMode::Binary) => {
            let event = serde_json::from_str(payload).ok().and_then(CloudEvent::from_stored)?;
            let binary = event.binary();
            let mut headers = binary.headers;
            if !binary.content_type.is_empty() {
                headers.push(("content-type".into(), binary.content_type));
            }
            (headers, binary.body)
        }
        // The stored payload is the event serialized as `CloudEvent::structured_body` does it:
        // sent as it is, without reading it back and writing it again.
        _ => (vec![("content-type".into(), "application/cloudevents+json".into())], payload.as_bytes().to_vec()),
    };
    let timestamp = now_ms.div_euclid(1000);
    let keys = signing_keys(sub, sealer, now_ms);
    let signature = signature_header(keys.iter().map(Vec::as_slice), message_id, timestamp, &body);
    headers.push(("webhook-id".into(), message_id.to_string()));
    headers.push(("webhook-timestamp".into(), timestamp.to_string()));
    headers.push(("webhook-signature".into(), signature));
    Some(Outgoing { headers, body, timeout: Duration::from_millis(sub.timeout_ms.max(1) as u64) })
}
