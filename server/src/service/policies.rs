//! The retry-policy preview: when each attempt would happen if all failed.

use domain::dto;
use domain::request::PreviewBody;
use serde_json::Value;

use super::Result;

pub fn preview(body: &Value) -> Result<dto::Preview> {
    let policy = PreviewBody::read(body)?.retry_policy;
    let attempts = policy
        .preview()
        .into_iter()
        .map(|(attempt, offset_ms)| dto::PreviewAttempt { attempt, offset_secs: offset_ms as f64 / 1000.0 })
        .collect();
    Ok(dto::Preview { attempts, ttl_secs: policy.ttl_secs })
}
