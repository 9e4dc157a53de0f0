//! Subscription target URLs and the address block list.
//!
//! Customers choose the URLs Herald posts to, so a careless check turns Herald into an SSRF proxy
//! towards loopback, the private network or cloud metadata services (169.254.169.254, fd00:ec2::254).
//! [`TargetUrl::parse`] refuses anything that is not a plain http(s) URL, and [`is_forbidden_ip`] is the
//! one block list. It runs twice: here on hosts that are literal addresses (in every spelling the
//! WHATWG parser accepts: `127.1`, `0x7f000001`, `[::ffff:127.0.0.1]`...), and in the server's DNS
//! resolver on every resolved address, so a name pointing at 10.0.0.1 is refused too.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use url::{Host, Url};

use crate::errors::FieldError;

/// Longest accepted target URL, in bytes (before and after normalization).
const MAX_URL_LEN: usize = 2048;

/// A subscription target URL, parsed and normalized: http or https only, a host, no userinfo
/// (user:pass@ is refused), no fragment (dropped), scheme and host lowercased, default port dropped,
/// a trailing dot on a domain host is KEPT in `as_str()` but `endpoint_key()` strips it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetUrl {
    url: Url,
    /// The host without IPv6 brackets, trailing dot kept.
    host: String,
}

impl TargetUrl {
    /// `field` is the name to use in the FieldError (e.g. "url"). Refuse: unparsable, other schemes
    /// (ftp://, file://, javascript:...), missing host, userinfo, length > 2048, whitespace/control chars.
    pub fn parse(raw: &str, field: &str) -> Result<TargetUrl, FieldError> {
        let err = |message: &str| FieldError::new(field, message);

        if raw.is_empty() {
            return Err(err("must not be empty"));
        }
        if raw.len() > MAX_URL_LEN {
            return Err(err("must be at most 2048 bytes long"));
        }
        // The WHATWG parser silently strips leading/trailing spaces and removes tabs and newlines
        // anywhere: refuse them instead of guessing what the customer meant.
        if raw.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(err("must not contain whitespace or control characters"));
        }

        // Demand the plain `http://host` / `https://host` shape before the lenient parser sees it:
        // WHATWG turns `http:///x`, `http:x` and `http:\\x` into `http://x/`.
        let (scheme, rest) = raw.split_once(':').ok_or_else(|| err("must be an absolute http or https URL"))?;
        if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
            return Err(err("scheme must be http or https"));
        }
        let authority = rest.strip_prefix("//").ok_or_else(|| err("must be of the form http(s)://host/..."))?;
        let authority_end = authority.find(['/', '\\', '?', '#']).unwrap_or(authority.len());
        let authority = &authority[..authority_end];
        if authority.is_empty() {
            return Err(err("must have a host"));
        }
        // Also catches a bare `@` (`http://@host/`), which the parser drops without a trace.
        if authority.contains('@') {
            return Err(err("must not contain credentials (user:password@)"));
        }

        let mut url = Url::parse(raw).map_err(|e| err(&format!("is not a valid URL: {e}")))?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(err("must not contain credentials (user:password@)"));
        }
        if url.port() == Some(0) {
            return Err(err("port must not be 0"));
        }
        let host = match url.host() {
            None => return Err(err("must have a host")),
            Some(Host::Domain(d)) => {
                // One trailing dot (fully qualified name) is fine; empty labels are not.
                let name = d.strip_suffix('.').unwrap_or(d);
                if name.is_empty() || name.split('.').any(str::is_empty) {
                    return Err(err("host has an empty label"));
                }
                d.to_owned()
            }
            Some(Host::Ipv4(ip)) => ip.to_string(),
            Some(Host::Ipv6(ip)) => ip.to_string(),
        };
        url.set_fragment(None);
        if url.as_str().len() > MAX_URL_LEN {
            return Err(err("must be at most 2048 bytes long"));
        }
        Ok(TargetUrl { url, host })
    }

    /// The URL to send requests to.
    pub fn as_str(&self) -> &str {
        self.url.as_str()
    }

    pub fn url(&self) -> &Url {
        &self.url
    }

    /// The key that identifies the circuit (endpoint) of this URL: scheme://host[:port]/path?query,
    /// normalized (lowercase host, no default port, no trailing dot on host, no fragment).
    pub fn endpoint_key(&self) -> String {
        let host = match self.url.host() {
            Some(Host::Ipv6(ip)) => format!("[{ip}]"),
            _ => self.host.strip_suffix('.').unwrap_or(&self.host).to_owned(),
        };
        let mut key = format!("{}://{host}", self.url.scheme());
        if let Some(port) = self.url.port() {
            key.push_str(&format!(":{port}"));
        }
        key.push_str(self.url.path());
        if let Some(query) = self.url.query() {
            key.push('?');
            key.push_str(query);
        }
        key
    }

    /// Some(ip) when the host is a literal address in any spelling that the WHATWG URL parser (the `url`
    /// crate) turns into an IP: 127.1, 2130706433, 0x7f000001, 0177.0.0.1, 0, [::1], [::ffff:7f00:1]...
    pub fn literal_ip(&self) -> Option<IpAddr> {
        match self.url.host()? {
            Host::Ipv4(ip) => Some(IpAddr::V4(ip)),
            Host::Ipv6(ip) => Some(IpAddr::V6(ip)),
            Host::Domain(_) => None,
        }
    }

    /// Whether the host is `localhost` or a name under it, which always means loopback (RFC 6761),
    /// whatever a resolver says.
    pub fn is_localhost_name(&self) -> bool {
        let name = self.host.strip_suffix('.').unwrap_or(&self.host).to_ascii_lowercase();
        matches!(self.url.host(), Some(Host::Domain(_))) && (name == "localhost" || name.ends_with(".localhost"))
    }

    /// Whether the URL names a private, loopback or reserved target without any DNS lookup: a literal
    /// address in the block list, or a localhost name.
    pub fn is_forbidden_literal(&self) -> bool {
        self.literal_ip().is_some_and(is_forbidden_ip) || self.is_localhost_name()
    }

    /// Host as in the URL (no brackets for IPv6).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Port, or the scheme default.
    pub fn port(&self) -> u16 {
        // Only http and https get past `parse`, both have a default port.
        self.url.port_or_known_default().unwrap_or(80)
    }
}

impl std::fmt::Display for TargetUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// IPv4 blocks Herald never connects to (RFC 6890 special-purpose registry, minus the globally
/// reachable ones).
const FORBIDDEN_V4: &[(Ipv4Addr, u8)] = &[
    (Ipv4Addr::new(0, 0, 0, 0), 8),          // "this network"
    (Ipv4Addr::new(10, 0, 0, 0), 8),         // private
    (Ipv4Addr::new(100, 64, 0, 0), 10),      // CGNAT (and 100.100.100.200, Alibaba metadata)
    (Ipv4Addr::new(127, 0, 0, 0), 8),        // loopback
    (Ipv4Addr::new(169, 254, 0, 0), 16),     // link-local (and 169.254.169.254, cloud metadata)
    (Ipv4Addr::new(172, 16, 0, 0), 12),      // private
    (Ipv4Addr::new(192, 0, 0, 0), 24),       // IETF protocol assignments
    (Ipv4Addr::new(192, 0, 2, 0), 24),       // documentation TEST-NET-1
    (Ipv4Addr::new(192, 88, 99, 0), 24),     // 6to4 relay anycast
    (Ipv4Addr::new(192, 168, 0, 0), 16),     // private
    (Ipv4Addr::new(198, 18, 0, 0), 15),      // benchmarking
    (Ipv4Addr::new(198, 51, 100, 0), 24),    // documentation TEST-NET-2
    (Ipv4Addr::new(203, 0, 113, 0), 24),     // documentation TEST-NET-3
    (Ipv4Addr::new(224, 0, 0, 0), 4),        // multicast
    (Ipv4Addr::new(240, 0, 0, 0), 4),        // reserved
    (Ipv4Addr::new(255, 255, 255, 255), 32), // broadcast (already inside 240/4)
];

/// IPv6 blocks that are forbidden whatever they embed. The blocks that embed an IPv4 address
/// (::ffff:0:0/96, 64:ff9b::/96, 2002::/16) are decided by that address in [`is_forbidden_v6`].
const FORBIDDEN_V6: &[(Ipv6Addr, u8)] = &[
    (Ipv6Addr::new(0, 0, 0, 0, 0, 0, 0, 0), 96), // ::, ::1 and deprecated IPv4-compatible ::a.b.c.d
    (Ipv6Addr::new(0x64, 0xff9b, 1, 0, 0, 0, 0, 0), 48), // local-use NAT64
    (Ipv6Addr::new(0x100, 0, 0, 0, 0, 0, 0, 0), 64), // discard-only
    (Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0), 32), // Teredo
    (Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0), 32), // documentation
    (Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0), 7), // unique-local (and fd00:ec2::254, AWS metadata)
    (Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0), 10), // link-local
    (Ipv6Addr::new(0xfec0, 0, 0, 0, 0, 0, 0, 0), 10), // site-local (deprecated)
    (Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0), 8), // multicast
];

/// True when Herald must never connect to this address unless `allow_private_targets` is on.
pub fn is_forbidden_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_forbidden_v4(v4),
        IpAddr::V6(v6) => is_forbidden_v6(v6),
    }
}

fn is_forbidden_v4(ip: Ipv4Addr) -> bool {
    let ip = u32::from(ip);
    FORBIDDEN_V4.iter().any(|&(net, len)| {
        let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
        ip & mask == u32::from(net) & mask
    })
}

fn is_forbidden_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    let v4 = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));

    // IPv4-mapped ::ffff:a.b.c.d is the IPv4 address itself for the socket layer.
    if let Some(mapped) = ip.to_ipv4_mapped() {
        return is_forbidden_v4(mapped);
    }
    // NAT64 64:ff9b::a.b.c.d reaches a.b.c.d through the translator.
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return is_forbidden_v4(v4(s[6], s[7]));
    }
    // 6to4 2002:AABB:CCDD::/48 reaches AA.BB.CC.DD through a relay.
    if s[0] == 0x2002 {
        return is_forbidden_v4(v4(s[1], s[2]));
    }

    let ip = u128::from(ip);
    FORBIDDEN_V6.iter().any(|&(net, len)| {
        let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
        ip & mask == u128::from(net) & mask
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn forbidden_ip_table() {
        let cases: &[(&str, bool)] = &[
            // 0.0.0.0/8
            ("0.0.0.0", true),
            ("0.1.2.3", true),
            ("0.255.255.255", true),
            ("1.0.0.0", false),
            // 10/8
            ("9.255.255.255", false),
            ("10.0.0.0", true),
            ("10.0.0.1", true),
            ("10.255.255.255", true),
            ("11.0.0.0", false),
            // 100.64/10
            ("100.63.255.255", false),
            ("100.64.0.0", true),
            ("100.100.100.200", true),
            ("100.127.255.255", true),
            ("100.128.0.0", false),
            // 127/8
            ("126.255.255.255", false),
            ("127.0.0.1", true),
            ("127.0.0.0", true),
            ("127.255.255.255", true),
            ("128.0.0.0", false),
            // 169.254/16
            ("169.253.255.255", false),
            ("169.254.0.0", true),
            ("169.254.169.254", true),
            ("169.254.255.255", true),
            ("169.255.0.0", false),
            // 172.16/12
            ("172.15.255.255", false),
            ("172.16.0.0", true),
            ("172.20.1.1", true),
            ("172.31.255.255", true),
            ("172.32.0.0", false),
            // 192.0.0/24, 192.0.2/24
            ("191.255.255.255", false),
            ("192.0.0.0", true),
            ("192.0.0.255", true),
            ("192.0.1.0", false),
            ("192.0.2.0", true),
            ("192.0.2.255", true),
            ("192.0.3.0", false),
            // 192.88.99/24
            ("192.88.98.255", false),
            ("192.88.99.1", true),
            ("192.88.100.0", false),
            // 192.168/16
            ("192.167.255.255", false),
            ("192.168.0.0", true),
            ("192.168.1.1", true),
            ("192.168.255.255", true),
            ("192.169.0.0", false),
            // 198.18/15
            ("198.17.255.255", false),
            ("198.18.0.0", true),
            ("198.19.255.255", true),
            ("198.20.0.0", false),
            // 198.51.100/24, 203.0.113/24
            ("198.51.99.255", false),
            ("198.51.100.7", true),
            ("198.51.101.0", false),
            ("203.0.112.255", false),
            ("203.0.113.0", true),
            ("203.0.113.255", true),
            ("203.0.114.0", false),
            // 224/4, 240/4, broadcast
            ("223.255.255.255", false),
            ("224.0.0.0", true),
            ("239.255.255.250", true),
            ("240.0.0.0", true),
            ("250.1.2.3", true),
            ("255.255.255.255", true),
            // public IPv4
            ("8.8.8.8", false),
            ("1.1.1.1", false),
            ("93.184.216.34", false),
            ("52.95.110.1", false),
            // IPv6 ::/96
            ("::", true),
            ("::1", true),
            ("::2", true),
            ("::7f00:1", true),
            ("::808:808", true),
            ("::1:0:0:0", false),
            // IPv4-mapped
            ("::ffff:127.0.0.1", true),
            ("::ffff:7f00:1", true),
            ("::ffff:10.1.2.3", true),
            ("::ffff:169.254.169.254", true),
            ("::ffff:0.0.0.0", true),
            ("::ffff:8.8.8.8", false),
            ("::ffff:1.1.1.1", false),
            // NAT64
            ("64:ff9b::808:808", false),
            ("64:ff9b::8.8.8.8", false),
            ("64:ff9b::7f00:1", true),
            ("64:ff9b::a9fe:a9fe", true),
            ("64:ff9b::c0a8:101", true),
            ("64:ff9b:1::", true),
            ("64:ff9b:1:ffff:ffff:ffff:ffff:ffff", true),
            ("64:ff9b:2::", false),
            // discard
            ("100::", true),
            ("100::ffff:ffff:ffff:ffff", true),
            ("100:0:0:1::", false),
            // Teredo, documentation
            ("2001::", true),
            ("2001:0:4136:e378:8000:63bf:3fff:fdd2", true),
            ("2001:1::", false),
            ("2001:db8::", true),
            ("2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", true),
            ("2001:db9::", false),
            ("2001:4860:4860::8888", false),
            // 6to4
            ("2002:0808:0808::1", false),
            ("2002:7f00:1::1", true),
            ("2002:a00:1::", true),
            ("2002:a9fe:a9fe::", true),
            ("2002:c0a8:101:1::1", true),
            ("2003::1", false),
            // unique-local
            ("fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", false),
            ("fc00::", true),
            ("fd00:ec2::254", true),
            ("fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", true),
            // link-local, site-local
            ("fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff", false),
            ("fe80::", true),
            ("fe80::1", true),
            ("febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", true),
            ("fec0::1", true),
            ("feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", true),
            // multicast
            ("ff00::", true),
            ("ff02::1", true),
            ("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", true),
            // public IPv6
            ("2606:4700:4700::1111", false),
            ("2a00:1450:4001:80b::200e", false),
        ];
        assert!(cases.len() >= 80);
        for &(addr, expected) in cases {
            let ip: IpAddr = addr.parse().unwrap_or_else(|_| panic!("bad test address {addr}"));
            assert_eq!(is_forbidden_ip(ip), expected, "is_forbidden_ip({addr})");
        }
    }

    /// Literal spellings of forbidden addresses: each must parse, yield `ip`, and be forbidden.
    #[test]
    fn literal_ip_spellings() {
        let cases: &[(&str, &str)] = &[
            ("http://127.0.0.1/", "127.0.0.1"),
            ("http://127.1/", "127.0.0.1"),
            ("http://127.0.1/", "127.0.0.1"),
            ("http://2130706433/", "127.0.0.1"),
            ("http://0x7f000001/", "127.0.0.1"),
            ("http://0x7f.1/", "127.0.0.1"),
            ("http://0177.0.0.1/", "127.0.0.1"),
            ("http://017700000001/", "127.0.0.1"),
            ("http://127.0.0.1./", "127.0.0.1"),
            ("http://%31%32%37.0.0.1/", "127.0.0.1"),
            ("http://0/", "0.0.0.0"),
            ("http://0.0.0.0:9000/", "0.0.0.0"),
            ("http://[::1]/", "::1"),
            ("http://[::]/", "::"),
            ("http://[::ffff:7f00:1]/", "::ffff:127.0.0.1"),
            ("http://[::ffff:127.0.0.1]/", "::ffff:127.0.0.1"),
            ("http://[0:0:0:0:0:0:0:1]/", "::1"),
            ("http://10.0.0.1:8080/x", "10.0.0.1"),
            ("http://0xa.0.0.1/", "10.0.0.1"),
            ("https://169.254.169.254/latest/meta-data/", "169.254.169.254"),
            ("http://0xa9fea9fe/", "169.254.169.254"),
            ("http://2852039166/", "169.254.169.254"),
            ("http://100.100.100.200/", "100.100.100.200"),
            ("http://192.168.1.1/", "192.168.1.1"),
            ("http://172.16.0.1/", "172.16.0.1"),
            ("http://[fd00:ec2::254]/", "fd00:ec2::254"),
            ("http://[FE80::1]/", "fe80::1"),
            ("http://[64:ff9b::7f00:1]/", "64:ff9b::7f00:1"),
            ("http://[2002:7f00:1::]/", "2002:7f00:1::"),
            ("http://[::ffff:169.254.169.254]/", "::ffff:169.254.169.254"),
        ];
        for &(raw, expected) in cases {
            let t = TargetUrl::parse(raw, "url").unwrap_or_else(|e| panic!("{raw}: {e}"));
            let expected: IpAddr = expected.parse().unwrap();
            assert_eq!(t.literal_ip(), Some(expected), "{raw}");
            assert!(is_forbidden_ip(expected), "{raw} should be forbidden");
        }
    }

    #[test]
    fn localhost_names_are_forbidden_without_a_lookup() {
        for raw in ["http://localhost/", "http://LOCALHOST:8080/", "http://localhost./", "http://api.localhost/x"] {
            let t = TargetUrl::parse(raw, "url").unwrap();
            assert!(t.is_localhost_name() && t.is_forbidden_literal(), "{raw}");
        }
        for raw in ["http://localhost.example.com/", "http://mylocalhost/", "http://example.com/localhost"] {
            assert!(!TargetUrl::parse(raw, "url").unwrap().is_forbidden_literal(), "{raw}");
        }
        assert!(TargetUrl::parse("http://0x7f.1/", "url").unwrap().is_forbidden_literal());
    }

    /// (raw, as_str, endpoint_key, host, port, literal ip)
    type Accepted = (&'static str, &'static str, &'static str, &'static str, u16, Option<&'static str>);

    /// The OpenAPI pattern of `url` (server/src/api/schemas.rs) allows these characters after the
    /// host: the server keeps them as they are, so a URL the pattern allows is never lengthened.
    #[test]
    fn the_documented_url_characters_are_kept_as_they_are() {
        let chars = "AZaz09._~!$&()*+,;=:@%/?|[]-";
        let raw = format!("http://Example.com/{chars}?{chars}");
        let parsed = TargetUrl::parse(&raw, "url").unwrap();
        assert_eq!(parsed.as_str(), raw.replace("Example", "example"));
        assert_eq!(TargetUrl::parse(&format!("{raw}#{chars}"), "url").unwrap().as_str(), parsed.as_str());
    }

    #[test]
    fn accepted_urls_are_normalized() {
        let cases: &[Accepted] = &[
            (
                "HTTPS://Example.COM:443/a?b=1#frag",
                "https://example.com/a?b=1",
                "https://example.com/a?b=1",
                "example.com",
                443,
                None,
            ),
            ("http://example.com", "http://example.com/", "http://example.com/", "example.com", 80, None),
            (
                "http://example.com:80/hook",
                "http://example.com/hook",
                "http://example.com/hook",
                "example.com",
                80,
                None,
            ),
            (
                "https://example.com:8443/hook",
                "https://example.com:8443/hook",
                "https://example.com:8443/hook",
                "example.com",
                8443,
                None,
            ),
            ("http://localhost./", "http://localhost./", "http://localhost/", "localhost.", 80, None),
            (
                "https://Hooks.Example.com.:443/in?x=1&y=2#top",
                "https://hooks.example.com./in?x=1&y=2",
                "https://hooks.example.com/in?x=1&y=2",
                "hooks.example.com.",
                443,
                None,
            ),
            (
                "http://[2606:4700:4700::1111]:8080/x",
                "http://[2606:4700:4700::1111]:8080/x",
                "http://[2606:4700:4700::1111]:8080/x",
                "2606:4700:4700::1111",
                8080,
                Some("2606:4700:4700::1111"),
            ),
            ("http://8.8.8.8/", "http://8.8.8.8/", "http://8.8.8.8/", "8.8.8.8", 80, Some("8.8.8.8")),
            (
                "https://bücher.example/",
                "https://xn--bcher-kva.example/",
                "https://xn--bcher-kva.example/",
                "xn--bcher-kva.example",
                443,
                None,
            ),
        ];
        for &(raw, as_str, key, host, port, ip) in cases {
            let t = TargetUrl::parse(raw, "url").unwrap_or_else(|e| panic!("{raw}: {e}"));
            assert_eq!(t.as_str(), as_str, "{raw}");
            assert_eq!(t.url().as_str(), as_str, "{raw}");
            assert_eq!(t.endpoint_key(), key, "{raw}");
            assert_eq!(t.host(), host, "{raw}");
            assert_eq!(t.port(), port, "{raw}");
            assert_eq!(t.literal_ip(), ip.map(|s| s.parse().unwrap()), "{raw}");
        }
        let ok = TargetUrl::parse("http://8.8.8.8/", "url").unwrap();
        assert!(!is_forbidden_ip(ok.literal_ip().unwrap()));
    }

    #[test]
    fn rejected_urls() {
        let long = format!("https://example.com/{}", "a".repeat(2100));
        let cases: &[&str] = &[
            "",
            "example.com",
            "/relative/path",
            "ftp://x/",
            "file:///etc/passwd",
            "javascript:alert(1)",
            "data:text/plain,hi",
            "gopher://example.com/",
            "ws://example.com/",
            "http://user:pw@example.com/",
            "http://user@example.com/",
            "http://@example.com/",
            "http:///nohost",
            "http:nohost",
            "http:\\\\example.com/",
            "http://",
            "http://:80/",
            "http://exa mple.com/",
            " http://example.com/",
            "http://example.com/\n",
            "http://exam\tple.com/",
            "http://example.com/\u{0}",
            "http://example.com:99999/",
            "http://example.com:0/",
            "http://example..com/",
            "http://./",
            "http://1.2.3.4.5/",
            "http://[::1/",
            "http://exa<mple.com/",
            &long,
        ];
        for &raw in cases {
            let err = TargetUrl::parse(raw, "target").expect_err(raw);
            assert_eq!(err.field, "target", "{raw}");
            assert!(!err.message.is_empty(), "{raw}");
        }
        // Exactly at the limit is fine.
        let max = format!("https://example.com/{}", "a".repeat(2048 - 20));
        assert_eq!(max.len(), 2048);
        assert!(TargetUrl::parse(&max, "url").is_ok());
    }

    proptest! {
        #[test]
        fn mapped_v4_decides_like_v4(bits in any::<u32>()) {
            let a = Ipv4Addr::from(bits);
            prop_assert_eq!(
                is_forbidden_ip(IpAddr::V4(a)),
                is_forbidden_ip(IpAddr::V6(a.to_ipv6_mapped()))
            );
        }

        #[test]
        fn nat64_and_6to4_decide_like_v4(bits in any::<u32>(), low in any::<u64>()) {
            let a = Ipv4Addr::from(bits);
            let v4 = is_forbidden_ip(IpAddr::V4(a));
            let nat64 = Ipv6Addr::from((0x0064_ff9b_u128 << 96) | u128::from(bits));
            let six_to_four = Ipv6Addr::from(
                (0x2002_u128 << 112) | (u128::from(bits) << 80) | u128::from(low),
            );
            prop_assert_eq!(is_forbidden_ip(IpAddr::V6(nat64)), v4);
            prop_assert_eq!(is_forbidden_ip(IpAddr::V6(six_to_four)), v4);
        }
    }
}
