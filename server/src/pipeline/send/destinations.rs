//! Each receiver URL read once: a delivery needs the URL as the HTTP client
//! takes it and whether it names a private address literally, and reading the
//! text twice for every delivery cost more than looking it up.

use domain::target::TargetUrl;
use quick_cache::sync::Cache;
use url::Url;

/// URLs kept at most (a miss costs one parse).
const MOST: usize = 4096;

/// Where a delivery goes, as read from its subscription's URL.
#[derive(Clone, Debug, PartialEq)]
pub enum Destination {
    Send(Url),
    /// A private or reserved address written in the URL, while those are refused.
    Blocked,
    /// Not a URL the client can send to (subscriptions are checked when saved,
    /// so only a row written by other means gets here).
    Invalid(String),
}

pub struct Destinations {
    allow_private: bool,
    read: Cache<String, Destination>,
}

impl Destinations {
    pub fn new(allow_private: bool) -> Destinations {
        Destinations { allow_private, read: Cache::new(MOST) }
    }

    pub fn of(&self, raw: &str) -> Destination {
        if let Some(destination) = self.read.get(raw) {
            return destination;
        }
        let destination = self.read_url(raw);
        self.read.insert(raw.to_string(), destination.clone());
        destination
    }

    fn read_url(&self, raw: &str) -> Destination {
        if !self.allow_private && TargetUrl::parse(raw, "url").is_ok_and(|u| u.is_forbidden_literal()) {
            return Destination::Blocked;
        }
        match Url::parse(raw) {
            Ok(url) => Destination::Send(url),
            Err(e) => Destination::Invalid(format!("the URL {raw:?} is not valid: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_private_literal_is_blocked_unless_allowed() {
        let url = "http://127.0.0.1:9/hook";
        assert_eq!(Destinations::new(false).of(url), Destination::Blocked);
        assert_eq!(Destinations::new(true).of(url), Destination::Send(Url::parse(url).unwrap()));
    }

    #[test]
    fn a_url_is_read_the_same_from_the_table_as_the_first_time() {
        let destinations = Destinations::new(false);
        let url = "https://example.com:8443/a/b?c=d";
        let first = destinations.of(url);
        assert_eq!(first, Destination::Send(Url::parse(url).unwrap()));
        assert_eq!(destinations.of(url), first);
        assert!(matches!(destinations.of("not a url"), Destination::Invalid(detail) if detail.contains("not a url")));
    }

    #[test]
    fn the_table_keeps_at_most_its_bound() {
        let destinations = Destinations::new(false);
        for n in 0..2 * MOST {
            destinations.of(&format!("https://example.com/{n}"));
        }
        assert!(destinations.read.len() as u64 <= destinations.read.capacity());
        assert!(destinations.read.capacity() < (MOST + MOST / 8) as u64);
    }
}
