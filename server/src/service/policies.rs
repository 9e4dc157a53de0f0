//! The retry-policy preview: when each attempt would happen if all failed.

use domain::dto;
use domain::input::Fields;
use domain::policy::RetryPolicy;
use serde_json::Value;

use super::Result;

pub fn preview(body: &Value) -> Result<dto::Preview> {
    let mut f = Fields::new(body, "")?;
    let value = f.value("retry_policy");
    let policy = match value {
        None => {
            f.error("retry_policy", "is required");
            None
        }
        Some(v) => RetryPolicy::parse(v, "retry_policy").map_err(|e| f.errors.extend(e)).ok(),
    };
    f.finish()?;
    let policy = policy.expect("present when there are no errors");
    let attempts = policy
        .preview()
        .into_iter()
        .map(|(attempt, offset_ms)| dto::PreviewAttempt { attempt, offset_secs: offset_ms as f64 / 1000.0 })
        .collect();
    Ok(dto::Preview { attempts, ttl_secs: policy.ttl_secs })
}
