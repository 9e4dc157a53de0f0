//! Who may show the dashboard in a frame: by default nobody (`frame-ancestors 'none'` and
//! `X-Frame-Options: DENY`, against clickjacking); with `portal.frame_ancestors`, the product
//! pages it names, for an embedded customer portal. Their session cookie is then
//! `SameSite=None; Secure`, since a browser sends no other cookie inside another site's frame.

use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;
use tower_sessions::cookie::SameSite;

use crate::config::Settings;

/// The headers every dashboard answer carries.
#[derive(Clone)]
pub struct FrameHeaders {
    policy: HeaderValue,
    deny: bool,
}

impl FrameHeaders {
    pub fn new(settings: &Settings) -> FrameHeaders {
        // The origins were checked when the settings were loaded.
        let origins = settings.portal.origins().unwrap_or_default();
        if origins.is_empty() {
            FrameHeaders { policy: HeaderValue::from_static("frame-ancestors 'none'"), deny: true }
        } else {
            let policy = format!("frame-ancestors {}", origins.join(" "));
            let policy = HeaderValue::from_str(&policy).unwrap_or(HeaderValue::from_static("frame-ancestors 'none'"));
            FrameHeaders { policy, deny: false }
        }
    }

    /// Whether the dashboard may be framed by another site.
    pub fn embeddable(&self) -> bool {
        !self.deny
    }

    /// The session cookie's `SameSite` and `Secure`: what the frame needs, or `Lax` (and
    /// `Secure` as configured) when nothing frames the dashboard.
    pub fn cookie(&self, secure_cookies: bool) -> (SameSite, bool) {
        if self.embeddable() { (SameSite::None, true) } else { (SameSite::Lax, secure_cookies) }
    }

    pub fn apply(&self, response: &mut Response) {
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_SECURITY_POLICY, self.policy.clone());
        if self.deny {
            headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
        }
    }
}

pub async fn add(State(frame): State<FrameHeaders>, request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    frame.apply(&mut response);
    response
}
