//! Cross-site request refusal for the dashboard: a state-changing request must
//! come from Herald's own pages. Browsers say where a request comes from in
//! `Sec-Fetch-Site` and `Origin`; a request that says another site is refused.

use axum::extract::Request;
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

pub async fn same_origin_only(request: Request, next: Next) -> Response {
    let safe = matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if safe || is_same_origin(&request) {
        next.run(request).await
    } else {
        (StatusCode::FORBIDDEN, "cross-site request refused").into_response()
    }
}

fn is_same_origin(request: &Request) -> bool {
    let headers = request.headers();
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        return matches!(site, "same-origin" | "none");
    }
    match headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
        // Neither header: not a browser's cross-site form (browsers send Origin on POST).
        None => true,
        Some(origin) => {
            let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or_default();
            origin.split_once("://").is_some_and(|(_, authority)| authority.eq_ignore_ascii_case(host))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;

    fn post(headers: &[(&str, &str)]) -> Request {
        let mut builder = Request::builder().method(Method::POST).uri("/api/login").header("host", "herald.test:8080");
        for (k, v) in headers {
            builder = builder.header(*k, *v);
        }
        builder.body(Body::empty()).unwrap()
    }

    #[test]
    fn only_requests_from_herald_itself_may_change_state() {
        assert!(is_same_origin(&post(&[("sec-fetch-site", "same-origin")])));
        assert!(is_same_origin(&post(&[("origin", "http://herald.test:8080")])));
        assert!(is_same_origin(&post(&[])));
        assert!(!is_same_origin(&post(&[("sec-fetch-site", "cross-site")])));
        assert!(!is_same_origin(&post(&[("sec-fetch-site", "same-site")])));
        assert!(!is_same_origin(&post(&[("origin", "http://evil.test")])));
        assert!(!is_same_origin(&post(&[("origin", "null")])));
    }
}
