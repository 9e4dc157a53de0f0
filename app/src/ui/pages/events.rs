//! The event archive: the kept events with their filters, each linking to its
//! messages, and the replay of a time window to one subscription.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use crate::ui::components::{
    Changes, Frame, NextPage, SearchStopped, action_error, breakable, choice_select, count_of, load_error, time,
    urlencode,
};
use crate::ui::server_fns::{ReplayWindow, get_customer_choices, get_events, get_subscription_choices};
use domain::dto::{ArchiveFilter, EventEntry, Page};

fn filter_from_query() -> impl Fn() -> (ArchiveFilter, Option<String>) + Clone + Send + Sync {
    let query = use_query_map();
    move || {
        let q = query.read();
        let get = |k: &str| q.get(k).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let filter = ArchiveFilter {
            event_id: get("event_id"),
            event_type: get("type"),
            source: get("source"),
            since: get("since"),
            until: get("until"),
            customer_id: get("customer_id"),
        };
        (filter, get("cursor"))
    }
}

#[component]
pub fn EventsPage() -> impl IntoView {
    let query = use_query_map();
    let value = move |k: &str| query.read_untracked().get(k).unwrap_or_default();
    let page = Resource::new(filter_from_query(), |(filter, cursor)| async move {
        let filtered = filter != ArchiveFilter::default();
        get_events(filter, cursor).await.map(|page| (page, filtered))
    });
    let customers = Resource::new(|| (), |_| get_customer_choices());
    let subs = Resource::new(move || value("customer_id"), |customer| get_subscription_choices(Some(customer)));
    let replay = ServerAction::<ReplayWindow>::new();
    view! {
        <Frame title="Events">
            <form method="get" class="filters" role="search">
                <label>"Event id" <input name="event_id" value=value("event_id")/></label>
                <Suspense fallback=|| ()>
                    {move || Suspend::new(async move {
                        let customers = customers.await.unwrap_or_default();
                        (!customers.is_empty()).then(|| view! {
                            <label>"Customer" {choice_select("customer_id", "any", customers, value("customer_id"))}</label>
                        })
                    })}
                </Suspense>
                <label>"Type" <input name="type" value=value("type")/></label>
                <label>"Source" <input name="source" value=value("source")/></label>
                <label>"Since" <input name="since" placeholder="2026-01-31T00:00:00Z" value=value("since")/></label>
                <label>"Until" <input name="until" placeholder="2026-01-31T23:59:59Z" value=value("until")/></label>
                <button type="submit">"Filter"</button>
            </form>
            <Suspense fallback=|| ()>
                {move || Suspend::new(async move {
                    page.await.map(|(page, filtered)| table(page, filtered)).unwrap_or_else(load_error)
                })}
            </Suspense>
            <Changes>
                <h2 id="replay">"Replay a time window"</h2>
                <p class="hint">"Every kept event published in the window that the subscription accepts gets a new message to it, with a fresh attempt budget, whether or not it had one before."</p>
                {action_error(replay.value())}
                <ActionForm action=replay attr:class="stacked" attr:aria-labelledby="replay">
                    <Suspense fallback=|| ()>
                        {move || Suspend::new(async move {
                            let subs = subs.await.unwrap_or_default();
                            if subs.is_empty() {
                                view! { <p class="empty">"There is no subscription to replay to yet: "<a href="/subscriptions">"create one"</a>" first."</p> }.into_any()
                            } else {
                                view! {
                                    <label>"Subscription"
                                        <select name="subscription_id" required>
                                            {subs.into_iter().map(|c| view! { <option value=c.value>{c.label}</option> }).collect_view()}
                                        </select>
                                    </label>
                                }.into_any()
                            }
                        })}
                    </Suspense>
                    <label>"Since (RFC 3339)" <input name="since" required placeholder="2026-01-31T00:00:00Z" value=value("since")/></label>
                    <label>"Until (RFC 3339, at most 366 days later)" <input name="until" required placeholder="2026-01-31T23:59:59Z" value=value("until")/></label>
                    <label>"Only these event types (optional, comma-separated)" <input name="event_types" value=value("type")/></label>
                    <label>"Only this source (optional)" <input name="source" value=value("source")/></label>
                    <button type="submit">"Replay the window"</button>
                </ActionForm>
            </Changes>
        </Frame>
    }
}

fn table(page: Page<EventEntry>, filtered: bool) -> AnyView {
    if page.data.is_empty() && page.searched_back_to.is_none() {
        return if filtered {
            view! { <p class="empty">"No kept event matches. Widen the time range, or "<a href="?">"clear the filters"</a>". Events older than the retention period are no longer kept."</p> }.into_any()
        } else {
            view! { <p class="empty">"No events yet. Publish one with POST /api/v1/events; every accepted event is kept here for the retention period."</p> }.into_any()
        };
    }
    let admin = page.data.iter().any(|e| e.customer_name.is_some());
    view! {
        <table>
            <thead>
                <tr>
                    <th scope="col">"Event id"</th>
                    {admin.then(|| view! { <th scope="col">"Customer"</th> })}
                    <th scope="col">"Type"</th><th scope="col">"Source"</th><th scope="col">"Published"</th>
                    <th scope="col">"Messages"</th>
                </tr>
            </thead>
            <tbody>
                {page.data.into_iter().map(|e| {
                    let mut messages = format!("/messages?event_id={}", urlencode(&e.event.id));
                    if admin {
                        messages.push_str(&format!("&customer_id={}", urlencode(&e.customer_id)));
                    }
                    let count = e.event.message_ids.len();
                    view! {
                        <tr>
                            <td class="event-id" data-label="Event id"><code>{e.event.id.clone()}</code></td>
                            {admin.then(|| view! { <td data-label="Customer">{e.customer_name.clone().unwrap_or_default()}</td> })}
                            <td class="type" data-label="Type">{breakable(&e.event.event_type)}</td>
                            <td class="url" data-label="Source">{breakable(&e.event.source)}</td>
                            <td class="when" data-label="Published">{time(&e.event.published_at)}</td>
                            <td class="count" data-label="Messages">{if count == 0 {
                                view! { <span class="muted">"none"</span> }.into_any()
                            } else {
                                view! { <a href=messages>{count_of(count as u64, "message", "messages")}</a> }.into_any()
                            }}</td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
        <SearchStopped at=page.searched_back_to what="events"/>
        <NextPage next=page.next_cursor/>
    }
    .into_any()
}
