//! Sending one request to a receiver: the HTTP client (one deadline, no
//! redirects, a capped body), the request built from the stored event and
//! signed, the DNS filter that keeps private addresses out, the receivers'
//! URLs and secrets as last read, and OAuth 2.0 tokens.

pub mod credentials;
pub mod destinations;
pub mod http;
pub mod oauth;
pub mod request;
pub mod resolver;
