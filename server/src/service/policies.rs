//! The retry-policy preview: when each attempt would happen if all failed.

use domain::dto;
use domain::policy::RetryPolicy;

pub fn preview(policy: &RetryPolicy) -> dto::Preview {
    let attempts = policy
        .preview()
        .into_iter()
        .map(|(attempt, offset_ms)| dto::PreviewAttempt { attempt, offset_secs: offset_ms as f64 / 1000.0 })
        .collect();
    dto::Preview { attempts, ttl_secs: policy.ttl_secs }
}
