//! DNS resolution that refuses private, loopback, link-local and metadata
//! addresses, so a public name that resolves inward cannot reach them. The
//! check runs on the addresses actually connected to (no re-resolution race).

use std::net::SocketAddr;

use domain::target::is_forbidden_ip;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// The error a blocked name resolves to; the sender looks for it to classify
/// the attempt as `blocked_target`.
#[derive(Debug, thiserror::Error)]
#[error("{0} resolves only to private or reserved addresses")]
pub struct BlockedTarget(pub String);

pub struct GuardedResolver {
    pub allow_private: bool,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow_private = self.allow_private;
        let host = name.as_str().to_string();
        Box::pin(async move {
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> =
                found.into_iter().filter(|addr| allow_private || !is_forbidden_ip(addr.ip())).collect();
            if allowed.is_empty() {
                return Err(Box::new(BlockedTarget(host)) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}
