//! What only the dashboard asks of the services: the names behind a page's
//! ids, and the choices of its selects. Names are read for one page of rows at
//! a time, by key, so they cost the same on any size of history.

use std::collections::{HashMap, HashSet};

use domain::dto::{self, Choice, EventEntry, LogEntry, Owners};
use domain::ids::{CustomerId, EndpointId, SubscriptionId};

use super::{Principal, Result, Services};
use crate::store::page::PageRequest;
use crate::store::{customers, endpoints, subscriptions};

/// The most options a select offers; a longer list is narrowed by customer first.
pub const MAX_CHOICES: u64 = 500;

fn distinct<'a, Id: From<&'a str>>(ids: impl Iterator<Item = &'a str>) -> Vec<Id> {
    ids.collect::<HashSet<_>>().into_iter().map(Id::from).collect()
}

/// Customer names by id, for the admin; nothing for a customer, who knows their own.
async fn customer_names(
    services: &Services,
    who: &Principal,
    ids: Vec<CustomerId>,
) -> Result<HashMap<CustomerId, String>> {
    if !matches!(who, Principal::Admin { .. }) {
        return Ok(HashMap::new());
    }
    Ok(customers::by_ids(&services.db, ids).await?.into_iter().map(|c| (c.id, c.name)).collect())
}

/// A page of the delivery log with the names of its subscriptions, endpoints and (for admins) customers.
pub async fn log_entries(
    services: &Services,
    who: &Principal,
    page: dto::Page<dto::Message>,
) -> Result<dto::Page<LogEntry>> {
    let messages = &page.data;
    // Each by id: (name or URL, customer id).
    let subs: HashMap<SubscriptionId, (String, CustomerId)> =
        subscriptions::by_ids(&services.db, distinct(messages.iter().map(|m| m.subscription_id.as_str())))
            .await?
            .into_iter()
            .map(|s| (s.id, (s.name, s.customer_id)))
            .collect();
    let urls: HashMap<EndpointId, (String, CustomerId)> =
        endpoints::by_ids(&services.db, distinct(messages.iter().map(|m| m.endpoint_id.as_str())))
            .await?
            .into_iter()
            .map(|e| (e.id, (e.url, e.customer_id)))
            .collect();
    let customers = distinct(subs.values().chain(urls.values()).map(|(_, customer)| customer.as_str()));
    let names = customer_names(services, who, customers).await?;
    let data = page
        .data
        .into_iter()
        .map(|message| {
            let sub = subs.get(message.subscription_id.as_str());
            let url = urls.get(message.endpoint_id.as_str());
            let customer = sub.or(url).and_then(|(_, customer)| names.get(customer).cloned());
            let owners = Owners {
                subscription_name: sub.map(|(name, _)| name.clone()),
                endpoint_url: url.map(|(url, _)| url.clone()),
                customer_name: customer,
            };
            LogEntry { message, owners }
        })
        .collect();
    Ok(dto::Page { data, next_cursor: page.next_cursor, searched_back_to: page.searched_back_to })
}

/// A page of the archive with (for admins) each event's customer by name.
pub async fn event_entries(
    services: &Services,
    who: &Principal,
    page: dto::Page<(CustomerId, dto::Event)>,
) -> Result<dto::Page<EventEntry>> {
    let names = customer_names(services, who, distinct(page.data.iter().map(|(c, _)| c.as_str()))).await?;
    let data = page
        .data
        .into_iter()
        .map(|(customer_id, event)| EventEntry {
            customer_name: names.get(&customer_id).cloned(),
            customer_id: customer_id.into(),
            event,
        })
        .collect();
    Ok(dto::Page { data, next_cursor: page.next_cursor, searched_back_to: page.searched_back_to })
}

/// The subscriptions a select offers, newest first: the customer's own, or for
/// the admin those of `customer_id` (every customer's when none is named,
/// labelled with the customer's name).
pub async fn subscription_choices(
    services: &Services,
    who: &Principal,
    customer_id: Option<&str>,
) -> Result<Vec<Choice>> {
    let customer = who.customer_filter(customer_id);
    let page = PageRequest { before: None, limit: MAX_CHOICES - 1 };
    let rows = subscriptions::list(&services.db, customer.as_ref(), &page).await?;
    let names = match customer {
        Some(_) => HashMap::new(),
        None => customer_names(services, who, distinct(rows.iter().map(|s| s.customer_id.as_str()))).await?,
    };
    Ok(rows
        .into_iter()
        .map(|s| {
            let label = match names.get(&s.customer_id) {
                Some(customer) => format!("{} · {customer}", s.name),
                None => s.name,
            };
            Choice { value: s.id.into(), label }
        })
        .collect())
}

/// The customers a select offers the admin, newest first.
pub async fn customer_choices(services: &Services, who: &Principal) -> Result<Vec<Choice>> {
    who.require_admin()?;
    let page = PageRequest { before: None, limit: MAX_CHOICES - 1 };
    Ok(customers::list(&services.db, &page)
        .await?
        .into_iter()
        .map(|c| Choice { value: c.id.into(), label: c.name })
        .collect())
}
