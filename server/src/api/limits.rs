//! What a single request may carry, checked before any handler runs: the size
//! of its head, a path and query the database can store, and (for JSON
//! bodies) how deeply they nest. A small body is read before the handler runs.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::CONTENT_LENGTH;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use percent_encoding::percent_decode_str;

use super::problem::ApiError;
use crate::config::LimitSettings;

/// Bodies up to this size are read in full before the handler runs.
const READ_FIRST_BYTES: u64 = 64 * 1024;

/// Refuses a request whose head is too large (431) or whose path or query decodes to something no
/// id or filter can be: invalid UTF-8, or a NUL (400). Both would otherwise reach the database.
pub async fn guard_request(State(limits): State<LimitSettings>, request: Request, next: Next) -> Response {
    if let Err(e) = check_head(&request, &limits) {
        return e.into_response();
    }
    match read_small_body(request, &limits).await {
        Ok(request) => next.run(request).await,
        Err(e) => e.into_response(),
    }
}

/// Reads a small body (by its Content-Length) before the handler answers. A
/// handler that answers without reading it (a 401, 404 or 405) would otherwise
/// leave the body to arrive after the answer, and the server closes such a
/// connection instead of keeping it alive: a client that sent the body apart
/// from the head and reuses the connection for its next request finds it closed.
async fn read_small_body(request: Request, limits: &LimitSettings) -> Result<Request, ApiError> {
    let length = request.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    let Some(length) = length.filter(|&n| n > 0 && n <= READ_FIRST_BYTES && n <= limits.max_body_bytes as u64) else {
        return Ok(request);
    };
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, length as usize)
        .await
        .map_err(|_| ApiError::field("body", "ended before its Content-Length"))?;
    Ok(Request::from_parts(parts, Body::from(bytes)))
}

fn check_head(request: &Request, limits: &LimitSettings) -> Result<(), ApiError> {
    let uri = request.uri();
    let head_bytes = uri.path_and_query().map_or(0, |pq| pq.as_str().len())
        + request.headers().iter().map(|(name, value)| name.as_str().len() + value.len()).sum::<usize>();
    if head_bytes > limits.max_header_bytes {
        return Err(ApiError::HeadersTooLarge(limits.max_header_bytes));
    }
    check_decoded("path", uri.path())?;
    if let Some(query) = uri.query() {
        // `+` means a space in a query; it cannot hide a NUL either way.
        check_decoded("query", query)?;
    }
    Ok(())
}

fn check_decoded(part: &str, raw: &str) -> Result<(), ApiError> {
    match percent_decode_str(raw).decode_utf8() {
        Err(_) => Err(ApiError::field(part, "is not valid UTF-8 once percent-decoded")),
        Ok(text) if text.contains('\0') => Err(ApiError::field(part, "must not contain NUL characters (%00)")),
        Ok(_) => Ok(()),
    }
}

/// Whether `json` nests arrays and objects deeper than `max`. A linear scan that skips strings, so
/// a hostile body is refused before a parser recurses into it.
pub fn nests_deeper_than(json: &[u8], max: usize) -> bool {
    // No more opening brackets than the limit cannot nest past it: a count the compiler
    // vectorizes settles most bodies without tracking their strings.
    if json.iter().filter(|&&b| b == b'[' || b == b'{').count() <= max {
        return false;
    }
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &byte in json {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::task::Poll;

    use axum::Router;
    use axum::body::Bytes;
    use axum::routing::post;
    use futures::StreamExt;
    use tower::ServiceExt;

    use super::*;

    #[tokio::test]
    async fn a_small_body_is_read_before_a_handler_answers_without_it() {
        let limits = LimitSettings::default();
        let app = Router::new()
            .route("/only-post", post(|| async { "never" }))
            .layer(axum::middleware::from_fn_with_state(limits, guard_request));
        let read_to_end = Arc::new(AtomicBool::new(false));
        let end = read_to_end.clone();
        let chunks = futures::stream::iter([Ok::<_, std::io::Error>(Bytes::from_static(b"{}"))]).chain(
            futures::stream::poll_fn(move |_| {
                end.store(true, Ordering::SeqCst);
                Poll::Ready(None)
            }),
        );
        let request = Request::builder()
            .method("PATCH")
            .uri("/only-post")
            .header(CONTENT_LENGTH, "2")
            .body(Body::from_stream(chunks))
            .unwrap();
        let response = app.oneshot(request).await.unwrap();
        assert_eq!(response.status(), 405);
        assert!(read_to_end.load(Ordering::SeqCst), "the body was read before the 405 went out");
    }

    #[test]
    fn depth_counts_arrays_and_objects_but_not_brackets_in_strings() {
        assert!(!nests_deeper_than(br#"{"a":[1,{"b":2}]}"#, 3));
        assert!(nests_deeper_than(br#"{"a":[1,{"b":[]}]}"#, 3));
        assert!(!nests_deeper_than(br#"{"a":"[[[[[[{{{{\"[[["}"#, 1));
        assert!(!nests_deeper_than(br#"["\\",[]]"#, 2), "an escaped backslash ends before the quote");
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(nests_deeper_than(deep.as_bytes(), 64));
        assert!(!nests_deeper_than(deep.as_bytes(), 100_000));
    }

    fn request(uri: &str, header_bytes: usize) -> Request {
        Request::builder().uri(uri).header("x-filler", "a".repeat(header_bytes)).body(Body::empty()).unwrap()
    }

    #[test]
    fn heads_are_checked_for_size_nul_and_encoding() {
        let limits = LimitSettings { max_header_bytes: 2048, ..LimitSettings::default() };
        assert!(check_head(&request("/api/v1/messages?state=dead", 100), &limits).is_ok());
        assert!(matches!(check_head(&request("/", 4096), &limits), Err(ApiError::HeadersTooLarge(2048))));
        let long_uri = format!("/api/v1/messages?event_type={}", "x".repeat(3000));
        assert!(matches!(check_head(&request(&long_uri, 0), &limits), Err(ApiError::HeadersTooLarge(_))));
        for (uri, part) in [
            ("/api/v1/subscriptions/sub_%00", "path"),
            ("/api/v1/messages/%FF%FE", "path"),
            ("/api/v1/messages?event_type=a%00b", "query"),
            ("/api/v1/messages?cursor=%C3%28", "query"),
        ] {
            match check_head(&request(uri, 0), &limits) {
                Err(ApiError::BadRequest { errors, .. }) => assert_eq!(errors[0].field, part, "{uri}"),
                other => panic!("{uri}: {other:?}"),
            }
        }
    }
}
