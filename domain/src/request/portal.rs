//! A customer portal link's request: who may hold it, for how long, and where "Back" leads.

use serde_json::Value;

#[cfg(feature = "openapi")]
use super::openapi;
use super::rules::{FieldRule, Text, one_of, text_enum_rule};
use crate::errors::FieldError;
use crate::states::PortalRole;
use crate::target::TargetUrl;

text_enum_rule!(PortalRole);

/// A link's life when the request names none.
pub const DEFAULT_PORTAL_TTL_SECS: i64 = 3_600;

/// Where the portal's "Back" link leads: an https URL, or http on a loopback host (a product
/// tried on a developer's machine). It is shown to the customer as a link, so nothing else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReturnUrl(pub String);

impl ReturnUrl {
    pub fn parse(raw: &str, field: &str) -> Result<ReturnUrl, FieldError> {
        let url = TargetUrl::parse(raw, field)?;
        let loopback = url.is_localhost_name() || url.literal_ip().is_some_and(|ip| ip.is_loopback());
        match url.url().scheme() {
            "https" => Ok(ReturnUrl(url.as_str().to_string())),
            "http" if loopback => Ok(ReturnUrl(url.as_str().to_string())),
            _ => Err(FieldError::new(field, "must be an https URL (or http on a loopback host)")),
        }
    }
}

#[cfg(feature = "openapi")]
const RETURN_URL: &str = r"^(https://[A-Za-z]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z]([A-Za-z0-9-]*[A-Za-z0-9])?)*|http://localhost)(:[1-9][0-9]{0,3})?([/?][A-Za-z0-9._~!$&()*+,;=:@%/?|\[\]-]*)?(#[A-Za-z0-9._~!$&()*+,;=:@%/?|\[\]-]*)?$";

impl FieldRule for ReturnUrl {
    fn read(value: &Value, name: &str) -> Result<Self, Vec<FieldError>> {
        let Text::<2048>(raw) = Text::read(value, name)?;
        ReturnUrl::parse(&raw, name).map_err(|e| vec![e])
    }

    /// What the server accepts is any https URL, or an http one on a loopback host, without
    /// credentials or whitespace. The pattern is the part a client can check alone, as the
    /// receiver URL's is: https with a host name, or http on `localhost`.
    #[cfg(feature = "openapi")]
    fn schema(nullable: bool) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        openapi::object_of(utoipa::openapi::schema::Type::String, nullable)
            .min_length(Some(1))
            .max_length(Some(2048))
            .pattern(Some(RETURN_URL))
            .into()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::{PortalLinkBody, ReadBody};
    use super::*;

    fn fields(body: Value) -> Vec<String> {
        PortalLinkBody::read(&body).unwrap_err().into_iter().map(|e| e.field).collect()
    }

    #[test]
    fn a_portal_link_body_names_each_bad_field() {
        let ok = PortalLinkBody::read(&json!({})).unwrap();
        assert!(ok.role.is_none() && ok.ttl_secs.is_none() && ok.return_url.is_none());
        assert_eq!(fields(json!({"ttl_secs": 59})), ["ttl_secs"]);
        assert_eq!(fields(json!({"ttl_secs": 86401})), ["ttl_secs"]);
        assert_eq!(fields(json!({"role": "owner"})), ["role"]);
        assert_eq!(fields(json!({"role": "admin"})), ["role"], "a link never makes an admin");
        assert_eq!(fields(json!({"return_url": "javascript:alert(1)"})), ["return_url"]);
        assert_eq!(fields(json!({"return_url": "http://app.example.com/settings"})), ["return_url"]);
        assert_eq!(fields(json!({"extra": 1})), ["extra"]);
        let body = json!({"role": "editor", "ttl_secs": 60, "return_url": "https://app.example.com/settings"});
        let read = PortalLinkBody::read(&body).unwrap();
        assert_eq!(read.role, Some(PortalRole::Editor));
        assert_eq!(read.return_url.unwrap().0, "https://app.example.com/settings");
    }

    #[test]
    fn http_return_urls_are_taken_on_loopback_only() {
        for good in ["http://127.0.0.1:3000/back", "http://localhost/back", "http://[::1]/", "https://x.example/"] {
            assert!(ReturnUrl::parse(good, "return_url").is_ok(), "{good}");
        }
        for bad in ["http://10.0.0.1/", "ftp://127.0.0.1/", "https://user:pw@x.example/", "/relative"] {
            assert!(ReturnUrl::parse(bad, "return_url").is_err(), "{bad}");
        }
    }
}
