//! A message on its way to be sent, with the rows its attempt needs, shared
//! with the other messages of the same publish or claim.

use std::sync::Arc;

use crate::store::entities::{endpoint, event, message, subscription};

/// A leased message (claimed, or handed over at publish) with what is needed
/// to send it; `None` where the row is gone.
pub struct Job {
    pub message: message::Model,
    pub subscription: Option<Arc<subscription::Model>>,
    pub event: Option<Arc<event::Model>>,
    pub endpoint: Option<Arc<endpoint::Model>>,
}
