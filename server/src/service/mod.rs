//! Use cases: each function validates, checks who may do it, and composes store
//! calls (in one transaction where it writes several rows). No HTTP here: the
//! REST API and the dashboard both call these functions with [`Services`].

pub mod audit;
pub mod console;
pub mod customers;
pub mod delivery_options;
pub mod endpoint_health;
pub mod endpoints;
pub mod event_types;
pub mod events;
pub mod idempotency;
pub mod liveness;
pub mod messages;
pub mod overview;
pub mod policies;
pub mod portal;
pub mod replays;
pub mod subscriptions;
pub mod users;
pub mod views;

use std::sync::Arc;

use domain::errors::FieldError;
use domain::ids::CustomerId;
use domain::query::Limit;
use sea_orm::{DatabaseConnection, DbErr};

use crate::clock::SharedClock;
use crate::config::Settings;
use crate::pipeline::{Pipeline, PublishError};
use crate::secrets::Sealer;
pub use crate::store::page::PageRequest;
use crate::store::{health, page};

/// What every use case works with: the database, the settings, the clock,
/// the sealer of subscription secrets, and the delivery pipeline.
#[derive(Clone)]
pub struct Services {
    pub db: DatabaseConnection,
    pub settings: Arc<Settings>,
    pub clock: SharedClock,
    pub sealer: Arc<Sealer>,
    pub pipeline: Pipeline,
}

impl Services {
    /// The services over the pipeline's database, settings, clock and sealer.
    pub fn new(pipeline: Pipeline) -> Services {
        Services {
            db: pipeline.db.clone(),
            settings: pipeline.settings.clone(),
            clock: pipeline.clock.clone(),
            sealer: pipeline.sealer.clone(),
            pipeline,
        }
    }

    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("{0} not found")]
    NotFound(&'static str),
    /// A body's field names an object the caller cannot see (none, or another customer's).
    #[error("{what} not found")]
    NotFoundField { field: &'static str, what: &'static str },
    #[error("invalid input")]
    Invalid(Vec<FieldError>),
    #[error("this action needs an admin")]
    Forbidden,
    /// The caller may read the customer's objects but not change them (the `viewer` role).
    #[error("this role can only read")]
    ReadOnly,
    #[error("{0}")]
    Conflict(String),
    #[error("database: {0}")]
    Db(DbErr),
    /// The database is away (see [`crate::store::health`]): try again shortly.
    #[error("the database is unavailable: {0}")]
    Unavailable(String),
    #[error("{0}")]
    Unsealable(#[from] crate::secrets::Unsealable),
}

impl ServiceError {
    pub fn field(field: &str, message: &str) -> ServiceError {
        ServiceError::Invalid(vec![FieldError::new(field, message)])
    }
}

impl From<DbErr> for ServiceError {
    fn from(e: DbErr) -> Self {
        if health::is_unavailable(&e) { ServiceError::Unavailable(e.to_string()) } else { ServiceError::Db(e) }
    }
}

impl From<PublishError> for ServiceError {
    fn from(e: PublishError) -> Self {
        match e {
            PublishError::Conflict(why) => ServiceError::Conflict(why),
            PublishError::Db(e) => e.into(),
            PublishError::Unavailable(why) => ServiceError::Unavailable(why),
            PublishError::Invalid(broken) => {
                let errors = broken.into_iter().flat_map(|(_, why)| why).map(|w| FieldError::new("data", w));
                ServiceError::Invalid(errors.collect())
            }
        }
    }
}

impl From<Vec<FieldError>> for ServiceError {
    fn from(errors: Vec<FieldError>) -> Self {
        ServiceError::Invalid(errors)
    }
}

pub type Result<T> = std::result::Result<T, ServiceError>;

/// Who is calling: the admin (token or admin user), one customer (its API key, its user, or an
/// `editor` portal link), or one customer's viewer (a `viewer` user or portal link), who reads
/// what the customer reads and changes nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    Admin { actor: String },
    Customer { customer_id: CustomerId, actor: String },
    Viewer { customer_id: CustomerId, actor: String },
}

impl Principal {
    pub fn actor(&self) -> &str {
        match self {
            Principal::Admin { actor } | Principal::Customer { actor, .. } | Principal::Viewer { actor, .. } => actor,
        }
    }

    /// The customer whose objects this caller is limited to; `None` for the admin.
    pub fn own_customer(&self) -> Option<&CustomerId> {
        match self {
            Principal::Admin { .. } => None,
            Principal::Customer { customer_id, .. } | Principal::Viewer { customer_id, .. } => Some(customer_id),
        }
    }

    pub fn require_admin(&self) -> Result<()> {
        match self {
            Principal::Admin { .. } => Ok(()),
            Principal::Customer { .. } | Principal::Viewer { .. } => Err(ServiceError::Forbidden),
        }
    }

    /// Every use case that changes state asks this first: a viewer changes nothing.
    pub fn require_writer(&self) -> Result<()> {
        match self {
            Principal::Viewer { .. } => Err(ServiceError::ReadOnly),
            Principal::Admin { .. } | Principal::Customer { .. } => Ok(()),
        }
    }

    /// The customer a customer-scoped read is limited to; `None` lets the
    /// admin read across customers.
    pub fn customer_filter(&self, requested: Option<&str>) -> Option<CustomerId> {
        match self.own_customer() {
            Some(own) => Some(own.clone()),
            None => requested.map(CustomerId::from),
        }
    }

    /// The customer a new object belongs to, or a named one is read from: the admin must name one.
    pub fn customer_for_write(&self, requested: Option<&str>) -> Result<CustomerId> {
        match (self.own_customer(), requested) {
            (Some(own), _) => Ok(own.clone()),
            (None, Some(id)) => Ok(CustomerId::from(id)),
            (None, None) => Err(ServiceError::field("customer_id", "is required when the admin acts for a customer")),
        }
    }

    /// Whether an object of this customer is visible; callers answer 404 when not.
    pub fn sees(&self, customer_id: &CustomerId) -> bool {
        self.own_customer().is_none_or(|own| own == customer_id)
    }
}

/// A list request of `limit` rows (read by its rule) after `cursor`, which must be one a
/// page gave.
pub fn page_request(limit: Option<Limit>, cursor: Option<&str>) -> Result<PageRequest> {
    let limit = limit.map_or(page::DEFAULT_LIMIT, |Limit(n)| n);
    let before = match cursor.filter(|c| !c.is_empty()) {
        None => None,
        Some(c) => Some(page::decode_cursor(c).ok_or_else(|| ServiceError::field("cursor", "is not a valid cursor"))?),
    };
    Ok(PageRequest { before, limit })
}
