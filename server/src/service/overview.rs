//! The dashboard's overview: messages by state, attempts per minute over the
//! last hour, and the endpoints whose circuit is open. The counts come from
//! those kept beside the rows (`store::counts`) and from indexes that hold only
//! the messages not delivered, so the page costs the same at any size of history.

use domain::dto::{Bucket, Overview};
use domain::states::MessageState;

use super::Services;
use super::{Principal, Result, views};
use crate::store::{counts, endpoints, messages};

const MINUTES: i64 = 60;

pub async fn overview(services: &Services, who: &Principal) -> Result<Overview> {
    let customer = who.customer_filter(None);
    let customer = customer.as_ref();
    let now = services.now_ms();
    // Every customer's: the gauges' latest reading (at most 20 s old) when the timer runs.
    let by_state: Vec<(MessageState, u64)> = match customer.is_none().then(|| services.pipeline.gauges.messages(now)) {
        Some(Some(latest)) => latest,
        _ => messages::count_by_state(&services.db, customer).await?,
    };
    let counts = MessageState::ALL
        .iter()
        .map(|s| (*s, by_state.iter().find(|(state, _)| state == s).map_or(0, |(_, n)| *n)))
        .collect();
    let this_minute = now / 60_000;
    let since = this_minute - MINUTES + 1;
    let mut per_minute: Vec<Bucket> = (0..MINUTES as u32).map(|ago| Bucket { ago, success: 0, failure: 0 }).collect();
    for (minute, succeeded, failed) in counts::attempts_per_minute(&services.db, customer, since).await? {
        let Some(slot) = per_minute.get_mut((this_minute - minute).clamp(0, MINUTES - 1) as usize) else { continue };
        slot.success += succeeded;
        slot.failure += failed;
    }
    let window_ms = services.settings.breaker.window_secs as i64 * 1000;
    let troubled_endpoints = endpoints::not_closed(&services.db, customer)
        .await?
        .into_iter()
        .map(|e| views::endpoint(e, now, window_ms))
        .collect();
    Ok(Overview { counts, per_minute, troubled_endpoints })
}
