//! One HTTP exchange with a receiver: a single deadline for connect, headers
//! and body; no redirects; no proxy from the environment; the body read up to
//! a cap; every failure named by kind.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use domain::request::MASK;
use domain::states::ErrorKind;
use reqwest::header::{HeaderMap, HeaderValue};
use reqwest::redirect::Policy;
use serde::Serialize;
use url::Url;

use super::resolver::{BlockedTarget, GuardedResolver};

/// The part of the response body that is kept on the attempt.
pub const KEPT_BODY_BYTES: usize = 4096;
/// Reading stops here: a receiver cannot make Herald read a huge body.
pub const READ_BODY_CAP: usize = 64 * 1024;

/// `max_idle` connections stay open per host: as many as may be in use at once,
/// since many endpoints often share one host and a smaller pool means a new
/// connection for most deliveries.
pub fn client(allow_private: bool, max_idle: usize) -> reqwest::Client {
    crate::tls::install_provider();
    reqwest::Client::builder()
        .redirect(Policy::none())
        .no_proxy()
        .dns_resolver(Arc::new(GuardedResolver { allow_private }))
        .user_agent(concat!("Herald/", env!("CARGO_PKG_VERSION")))
        .tcp_nodelay(true)
        .pool_max_idle_per_host(max_idle)
        .pool_idle_timeout(Duration::from_secs(90))
        .build()
        .expect("the HTTP client's settings are valid")
}

/// A request to a receiver, whose URL is read apart (see [`super::destinations`]).
pub struct Outgoing {
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    pub timeout: Duration,
}

#[derive(Debug, Default)]
pub struct Received {
    pub status: Option<u16>,
    /// As the response brought them, moved, not copied.
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    pub error: Option<(ErrorKind, String)>,
    pub duration_ms: u64,
}

impl Received {
    /// An attempt that failed before any request was sent.
    pub fn failed(kind: ErrorKind, detail: &str) -> Received {
        Received { error: Some((kind, detail.to_string())), ..Received::default() }
    }

    /// The first value of a header, if it is UTF-8.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| std::str::from_utf8(v.as_bytes()).ok())
    }
}

/// Headers as the attempt's record keeps them: a JSON object, names in order, the last value of
/// a repeated name, a value that is not UTF-8 read lossily, and a sensitive one (a credential, an
/// extra header's value) masked.
pub fn headers_json(headers: &HeaderMap) -> String {
    let mut pairs: Vec<(&str, Cow<str>)> = headers.iter().map(|(name, value)| (name.as_str(), shown(value))).collect();
    // Stable: a repeated name's values keep their order, and the last of them is written.
    pairs.sort_by(|a, b| a.0.cmp(b.0));
    serde_json::to_string(&JsonObject(&pairs)).expect("strings serialize to JSON")
}

/// A header's value as recorded: masked when it is sensitive.
fn shown(value: &HeaderValue) -> Cow<'_, str> {
    match value.is_sensitive() {
        true => Cow::Borrowed(MASK),
        false => String::from_utf8_lossy(value.as_bytes()),
    }
}

/// Pairs sorted by name, written as an object; a pair whose name the next pair repeats is skipped.
struct JsonObject<'a>(&'a [(&'a str, Cow<'a, str>)]);

impl Serialize for JsonObject<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let pairs = self.0.iter().enumerate();
        let last_of_each_name = pairs.filter(|(i, (name, _))| self.0.get(i + 1).is_none_or(|next| next.0 != *name));
        serializer.collect_map(last_of_each_name.map(|(_, (name, value))| (name, value)))
    }
}

/// Sends `out` to `url`.
pub async fn send(client: &reqwest::Client, url: Url, out: Outgoing) -> Received {
    let started = Instant::now();
    let mut received = Received::default();
    let deadline = tokio::time::Instant::now() + out.timeout;
    let request = client.post(url).timeout(out.timeout).headers(out.headers).body(out.body);
    match request.send().await {
        Err(e) => received.error = Some(classify(&e)),
        Ok(mut response) => {
            received.status = Some(response.status().as_u16());
            received.headers = std::mem::take(response.headers_mut());
            let mut read = 0usize;
            loop {
                match tokio::time::timeout_at(deadline, response.chunk()).await {
                    Err(_) => {
                        received.error = Some((ErrorKind::Timeout, "the response body did not end in time".into()));
                        break;
                    }
                    Ok(Err(e)) => {
                        received.error = Some(classify(&e));
                        break;
                    }
                    Ok(Ok(None)) => break,
                    Ok(Ok(Some(chunk))) => {
                        read += chunk.len();
                        let room = KEPT_BODY_BYTES.saturating_sub(received.body.len());
                        received.body.extend_from_slice(&chunk[..chunk.len().min(room)]);
                        if read > READ_BODY_CAP {
                            received.error = Some((
                                ErrorKind::BodyTooLarge,
                                format!("the response body exceeded {READ_BODY_CAP} bytes; reading stopped"),
                            ));
                            break;
                        }
                    }
                }
            }
        }
    }
    received.duration_ms = started.elapsed().as_millis() as u64;
    received
}

/// Names a transport failure by walking the error's causes.
fn classify(error: &reqwest::Error) -> (ErrorKind, String) {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    let mut text = String::new();
    while let Some(e) = cause {
        if let Some(blocked) = e.downcast_ref::<BlockedTarget>() {
            return (ErrorKind::BlockedTarget, blocked.to_string());
        }
        text.push_str(&e.to_string());
        text.push_str(": ");
        cause = e.source();
    }
    let text = text.trim_end_matches(": ").to_string();
    let lower = text.to_ascii_lowercase();
    let kind = if error.is_timeout() {
        ErrorKind::Timeout
    } else if lower.contains("dns") || lower.contains("failed to lookup") || lower.contains("name or service not known")
    {
        ErrorKind::Dns
    } else if lower.contains("certificate") || lower.contains("tls") || lower.contains("handshake") {
        ErrorKind::Tls
    } else if error.is_connect() {
        ErrorKind::Connect
    } else {
        ErrorKind::Other
    };
    (kind, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn to(url: &str) -> (Url, Outgoing) {
        let out = Outgoing { headers: HeaderMap::new(), body: b"{}".to_vec(), timeout: Duration::from_secs(5) };
        (Url::parse(url).unwrap(), out)
    }

    #[test]
    fn headers_are_kept_as_a_json_object_in_name_order_with_the_last_of_a_repeated_name() {
        let mut headers = HeaderMap::new();
        headers.insert("x-b", HeaderValue::from_static("2"));
        headers.append("x-a", HeaderValue::from_static("first"));
        headers.append("x-a", HeaderValue::from_static("last"));
        headers.insert("x-c", HeaderValue::from_bytes(b"caf\xe9").unwrap());
        let mut secret = HeaderValue::from_static("Bearer t0k");
        secret.set_sensitive(true);
        headers.insert("authorization", secret);
        assert_eq!(
            headers_json(&headers),
            "{\"authorization\":\"•••\",\"x-a\":\"last\",\"x-b\":\"2\",\"x-c\":\"caf\u{FFFD}\"}"
        );
        assert_eq!(headers_json(&HeaderMap::new()), "{}");
    }

    #[tokio::test]
    async fn a_name_that_resolves_to_loopback_is_blocked_before_any_connection() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (url, out) = to(&format!("http://localhost:{port}/hook"));
        let received = send(&client(false, 4), url, out).await;
        assert_eq!(received.error.as_ref().map(|(kind, _)| *kind), Some(ErrorKind::BlockedTarget), "{received:?}");
        assert_eq!(received.status, None);
        let accepted = tokio::time::timeout(Duration::from_millis(1), listener.accept()).await;
        assert!(accepted.is_err(), "nothing connected to the private address");
    }

    #[tokio::test]
    async fn private_targets_are_reached_when_allowed() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (url, out) = to(&format!("http://localhost:{port}/"));
        let sending = tokio::spawn(async move { send(&client(true, 4), url, out).await });
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut request = [0u8; 1024];
        let _ = tokio::io::AsyncReadExt::read(&mut socket, &mut request).await.unwrap();
        tokio::io::AsyncWriteExt::write_all(&mut socket, b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n")
            .await
            .unwrap();
        assert_eq!(sending.await.unwrap().status, Some(204));
    }
}
