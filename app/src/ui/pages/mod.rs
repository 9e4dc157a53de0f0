//! One module per page of the dashboard.

mod admin;
mod endpoints;
mod event_types;
mod events;
mod login;
mod messages;
mod overview;
mod replays;
mod subscription_delivery;
mod subscriptions;

pub use admin::{AuditPage, CustomersPage};
pub use endpoints::{EndpointPage, EndpointsPage};
pub use event_types::EventTypesPage;
pub use events::EventsPage;
pub use login::{LoginPage, NotFoundPage};
pub use messages::{DeadLettersPage, MessagePage, MessagesPage};
pub use overview::OverviewPage;
pub use replays::ReplayPage;
pub use subscriptions::{SubscriptionPage, SubscriptionsPage};
