//! Sending one request to a receiver: the HTTP client (one deadline, no
//! redirects, a capped body), the request built from the stored event and
//! signed, the DNS filter that keeps private addresses out, and the receivers'
//! URLs and signing keys as last read.

pub mod destinations;
pub mod http;
pub mod request;
pub mod resolver;
pub mod signing_keys;
