//! OAuth 2.0 client credentials (RFC 6749 §4.4) for a receiver that wants a bearer token: the
//! token is requested from the subscription's `token_url`, kept until its `expires_in` less 30 s,
//! shared by every delivery meanwhile (one request for many deliveries, even at once), and
//! renewed once after the receiver answers 401. Any failure to get one is the attempt's, of
//! kind `auth`; what the token endpoint says is kept, never the secret or the token.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use serde_json::Value;
use tokio::sync::Mutex;
use tokio::time::Instant;
use url::Url;
use url::form_urlencoded::{Serializer, byte_serialize};

use super::credentials::sensitive;
use super::destinations::{Destination, Destinations};
use super::http::READ_BODY_CAP;
use domain::target::TargetUrl;

/// A token is renewed this long before the token endpoint says it ends.
const EARLY: Duration = Duration::from_secs(30);
/// How long a token whose answer gave no `expires_in` is kept.
const WITHOUT_EXPIRY: Duration = Duration::from_secs(300);
/// The most of a failed answer a failure's detail quotes.
const QUOTED_BYTES: usize = 200;

struct Token {
    header: HeaderValue,
    until: Instant,
}

pub struct OAuthClient {
    token_url: String,
    /// `client_id:client_secret`, each form-encoded, as HTTP Basic (RFC 6749 §2.3.1).
    client_auth: HeaderValue,
    form: String,
    token: Mutex<Option<Token>>,
}

impl OAuthClient {
    pub fn new(token_url: &TargetUrl, client_id: &str, client_secret: &str, scope: Option<&str>) -> OAuthClient {
        let encode = |text: &str| byte_serialize(text.as_bytes()).collect::<String>();
        let basic = STANDARD.encode(format!("{}:{}", encode(client_id), encode(client_secret)));
        let mut form = Serializer::new(String::new());
        form.append_pair("grant_type", "client_credentials");
        if let Some(scope) = scope {
            form.append_pair("scope", scope);
        }
        OAuthClient {
            token_url: token_url.as_str().to_string(),
            client_auth: sensitive(format!("Basic {basic}").as_bytes()).expect("base64 is a valid header value"),
            form: form.finish(),
            token: Mutex::new(None),
        }
    }

    /// The `Authorization` value to send: the kept token, or a new one, within `timeout` (the
    /// wait for another delivery's fetch included). When `refused` is the value the receiver just
    /// answered 401 to, a new one is fetched, unless another delivery already did; if that fails,
    /// the refused token is not kept.
    pub async fn bearer(
        &self,
        client: &reqwest::Client,
        destinations: &Destinations,
        timeout: Duration,
        refused: Option<&HeaderValue>,
    ) -> Result<HeaderValue, String> {
        let deadline = Instant::now() + timeout;
        let late = || format!("no token within the attempt's {} ms", timeout.as_millis());
        // Held while fetching: deliveries that need the token meanwhile wait for this one's.
        let mut kept = tokio::time::timeout_at(deadline, self.token.lock()).await.map_err(|_| late())?;
        let now = Instant::now();
        if let Some(token) = kept.as_ref().filter(|t| t.until > now && Some(&t.header) != refused) {
            return Ok(token.header.clone());
        }
        let fetched = self.fetch(client, destinations, deadline.saturating_duration_since(now)).await;
        if fetched.is_err() && refused.is_some() {
            *kept = None;
        }
        let (token, lifetime) = fetched?;
        let header = sensitive(format!("Bearer {token}").as_bytes())
            .ok_or("the token endpoint's access_token cannot be sent in a header")?;
        *kept = Some(Token { header: header.clone(), until: now + lifetime.saturating_sub(EARLY) });
        Ok(header)
    }

    /// One token request: the access token and how long it lasts.
    async fn fetch(
        &self,
        client: &reqwest::Client,
        destinations: &Destinations,
        timeout: Duration,
    ) -> Result<(String, Duration), String> {
        let url: Url = match destinations.of(&self.token_url) {
            Destination::Send(url) => url,
            Destination::Blocked => return Err("the token_url is a private or reserved address".into()),
            Destination::Invalid(detail) => return Err(format!("the token_url: {detail}")),
        };
        let request = client
            .post(url)
            .timeout(timeout)
            .header(AUTHORIZATION, self.client_auth.clone())
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(ACCEPT, "application/json")
            .body(self.form.clone());
        let failed = |e: reqwest::Error| format!("the token request failed: {}", describe(&e));
        let mut response = request.send().await.map_err(failed)?;
        let status = response.status();
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(failed)? {
            body.extend_from_slice(&chunk);
            if body.len() > READ_BODY_CAP {
                return Err(format!("the token endpoint's answer exceeded {READ_BODY_CAP} bytes"));
            }
        }
        if !status.is_success() {
            let quoted = String::from_utf8_lossy(&body[..body.len().min(QUOTED_BYTES)]).into_owned();
            return Err(format!("the token endpoint answered {}: {quoted}", status.as_u16()));
        }
        read_token(&body)
    }
}

/// A transport error's causes, joined.
fn describe(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut cause = std::error::Error::source(error);
    while let Some(e) = cause {
        text.push_str(": ");
        text.push_str(&e.to_string());
        cause = e.source();
    }
    text
}

/// A successful token answer (RFC 6749 §5.1): a bearer `access_token` and, if given, its
/// `expires_in` seconds (a number, or a number as text, as some servers send it).
fn read_token(body: &[u8]) -> Result<(String, Duration), String> {
    let answer: Value =
        serde_json::from_slice(body).map_err(|_| "the token endpoint's answer is not JSON".to_string())?;
    let token = answer["access_token"]
        .as_str()
        .filter(|token| !token.is_empty())
        .ok_or("the token endpoint's answer has no access_token")?;
    if let Some(kind) = answer["token_type"].as_str().filter(|kind| !kind.eq_ignore_ascii_case("bearer")) {
        return Err(format!("the token endpoint gave a token of type {kind:?}, not a bearer token"));
    }
    let expires_in = match &answer["expires_in"] {
        Value::Number(n) => n.as_f64(),
        Value::String(text) => text.trim().parse().ok(),
        _ => None,
    };
    let lifetime = expires_in
        .filter(|secs| secs.is_finite())
        .map_or(WITHOUT_EXPIRY, |secs| Duration::from_secs_f64(secs.clamp(0.0, 365.0 * 86_400.0)));
    Ok((token.to_string(), lifetime))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_answer_is_read_as_rfc_6749_gives_it() {
        let (token, lifetime) =
            read_token(br#"{"access_token":"abc","token_type":"Bearer","expires_in":3600}"#).unwrap();
        assert_eq!((token.as_str(), lifetime), ("abc", Duration::from_secs(3600)));
        let (_, lifetime) = read_token(br#"{"access_token":"abc","expires_in":"60"}"#).unwrap();
        assert_eq!(lifetime, Duration::from_secs(60), "expires_in as text, and no token_type");
        assert_eq!(read_token(br#"{"access_token":"abc"}"#).unwrap().1, WITHOUT_EXPIRY);
        assert!(read_token(br#"{"access_token":"abc","token_type":"mac"}"#).unwrap_err().contains("mac"));
        assert!(read_token(br#"{"token":"abc"}"#).unwrap_err().contains("no access_token"));
        assert!(read_token(b"<html>").unwrap_err().contains("not JSON"));
    }

    #[test]
    fn the_client_authenticates_with_its_id_and_secret_form_encoded() {
        let url = TargetUrl::parse("https://id.example/token", "token_url").unwrap();
        let client = OAuthClient::new(&url, "my client", "s:cret&", Some("events.write read"));
        let expected = format!("Basic {}", STANDARD.encode("my+client:s%3Acret%26"));
        assert_eq!(client.client_auth.to_str().unwrap(), expected);
        assert!(client.client_auth.is_sensitive());
        assert_eq!(client.form, "grant_type=client_credentials&scope=events.write+read");
    }
}
