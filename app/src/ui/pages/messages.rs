use leptos::prelude::*;
use leptos_router::hooks::{use_params_map, use_query_map};
use serde_json::Value;

use crate::ui::components::{
    Badge, Changes, Frame, IdLink, NextPage, Notice, SearchStopped, action_error, breakable, choice_select, load_error,
    maybe_time, time,
};
use crate::ui::server_fns::{
    ReplayDead, ReplayMessage, get_customer_choices, get_message, get_messages, get_subscription_choices,
};
use domain::dto::{Attempt, LogEntry, LogFilter, MessageView, Owners, Page};
use domain::states::MessageState;

/// The filters of the delivery log, from the URL (a GET form).
fn filter_from_query(state_override: Option<&str>) -> impl Fn() -> (LogFilter, Option<String>) + Clone + Send + Sync {
    let query = use_query_map();
    let state_override = state_override.map(str::to_string);
    move || {
        let q = query.read();
        let get = |k: &str| q.get(k).filter(|v| !v.is_empty());
        let filter = LogFilter {
            event_id: get("event_id"),
            subscription_id: get("subscription_id"),
            state: state_override.clone().or_else(|| get("state")),
            event_type: get("event_type"),
            since: get("since"),
            until: get("until"),
            customer_id: get("customer_id"),
        };
        (filter, get("cursor"))
    }
}

#[component]
fn FilterForm(with_state: bool) -> impl IntoView {
    let query = use_query_map();
    let value = move |k: &str| query.read_untracked().get(k).unwrap_or_default();
    let current_state = value("state");
    let customer = value("customer_id");
    let customers = Resource::new(|| (), |_| get_customer_choices());
    let subs = Resource::new(move || value("customer_id"), |customer| get_subscription_choices(Some(customer)));
    view! {
        <form method="get" class="filters" role="search">
            <label>"Event id" <input name="event_id" value=value("event_id")/></label>
            <Suspense fallback=|| ()>
                {move || {
                    let customer = customer.clone();
                    Suspend::new(async move {
                        let customers = customers.await.unwrap_or_default();
                        let subs = subs.await.unwrap_or_default();
                        view! {
                            {(!customers.is_empty()).then(|| view! {
                                <label>"Customer" {choice_select("customer_id", "any", customers, customer.clone())}</label>
                            })}
                            <label>"Subscription" {choice_select("subscription_id", "any", subs, value("subscription_id"))}</label>
                        }
                    })
                }}
            </Suspense>
            {with_state.then(|| view! {
                <label>"State"
                    <select name="state">
                        <option value="">"any"</option>
                        {MessageState::ALL.iter().map(|s| {
                            let selected = current_state == s.as_str();
                            view! { <option value=s.as_str() selected=selected>{s.as_str()}</option> }
                        }).collect_view()}
                    </select>
                </label>
            })}
            <label>"Event type" <input name="event_type" value=value("event_type")/></label>
            <label>"Since" <input name="since" placeholder="2026-01-31T00:00:00Z" value=value("since")/></label>
            <label>"Until" <input name="until" placeholder="2026-01-31T23:59:59Z" value=value("until")/></label>
            <button type="submit">"Filter"</button>
        </form>
    }
}

/// What the table says when no message matches: how to find some.
fn no_messages(filtered: bool) -> AnyView {
    if filtered {
        view! { <p class="empty">"No messages match these filters. Widen the time range, or "<a href="?">"clear the filters"</a>"."</p> }.into_any()
    } else {
        view! { <p class="empty">"No messages yet. Publish an event to a subscription's event type (POST /api/v1/events), or send a test event from a "<a href="/subscriptions">"subscription"</a>"."</p> }.into_any()
    }
}

fn message_table(page: Page<LogEntry>, filtered: bool) -> AnyView {
    if page.data.is_empty() && page.searched_back_to.is_none() {
        return no_messages(filtered);
    }
    let admin = page.data.iter().any(|e| e.owners.customer_name.is_some());
    view! {
        <div class="table-scroll"><table>
            <thead>
                <tr>
                    <th scope="col">"Message"</th>
                    {admin.then(|| view! { <th scope="col">"Customer"</th> })}
                    <th scope="col">"Subscription"</th><th scope="col">"Endpoint"</th>
                    <th scope="col">"Event type"</th><th scope="col">"State"</th>
                    <th scope="col">"Attempts (last status)"</th><th scope="col">"Created"</th>
                    <th scope="col">"Next attempt"</th>
                </tr>
            </thead>
            <tbody>
                {page.data.into_iter().map(|e| {
                    let LogEntry { message: m, owners } = e;
                    view! {
                        <tr>
                            <td class="id" data-label="Message"><IdLink href=format!("/messages/{}", m.id) id=m.id.clone()/></td>
                            {admin.then(|| view! { <td data-label="Customer">{owners.customer_name.clone().unwrap_or_default()}</td> })}
                            <td data-label="Subscription">{match owners.subscription_name {
                                Some(name) => view! { <a href=format!("/subscriptions/{}", m.subscription_id)>{name}</a> }.into_any(),
                                None => view! { <span class="muted">"(deleted)"</span> }.into_any(),
                            }}</td>
                            <td class="url" data-label="Endpoint">{match owners.endpoint_url {
                                Some(url) => view! { <a href=format!("/endpoints/{}", m.endpoint_id)>{breakable(&url)}</a> }.into_any(),
                                None => view! { <code>{m.endpoint_id.clone()}</code> }.into_any(),
                            }}</td>
                            <td class="type" data-label="Event type">{breakable(&m.event_type)}</td>
                            <td data-label="State"><Badge text=m.state.as_str().to_string()/>" "{m.dead_reason.clone().unwrap_or_default()}</td>
                            <td data-label="Attempts">{m.attempt_count}{m.last_status.map(|s| format!(" ({s})"))}</td>
                            <td class="when" data-label="Created">{time(&m.created_at)}</td>
                            <td class="when" data-label="Next attempt">{maybe_time(&m.next_attempt_at)}</td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table></div>
        <SearchStopped at=page.searched_back_to what="messages"/>
        <NextPage next=page.next_cursor/>
    }
    .into_any()
}

#[component]
pub fn MessagesPage() -> impl IntoView {
    let page = Resource::new(filter_from_query(None), |(filter, cursor)| async move {
        let filtered = filter != LogFilter::default();
        get_messages(filter, cursor).await.map(|page| (page, filtered))
    });
    view! {
        <Frame title="Delivery log">
            <FilterForm with_state=true/>
            <Suspense fallback=|| ()>
                {move || Suspend::new(async move {
                    page.await.map(|(page, filtered)| message_table(page, filtered)).unwrap_or_else(load_error)
                })}
            </Suspense>
        </Frame>
    }
}

#[component]
pub fn DeadLettersPage() -> impl IntoView {
    let page = Resource::new(filter_from_query(Some("dead")), |(filter, cursor)| async move {
        let filtered = filter != LogFilter { state: Some("dead".into()), ..LogFilter::default() };
        get_messages(filter, cursor).await.map(|page| (page, filtered))
    });
    let replay = ServerAction::<ReplayDead>::new();
    let query = use_query_map();
    let value = move |k: &str| query.read_untracked().get(k).unwrap_or_default();
    view! {
        <Frame title="Dead letters">
            {action_error(replay.value())}
            <FilterForm with_state=false/>
            <Changes>
                <ActionForm action=replay attr:class="bulk">
                    <input type="hidden" name="subscription_id" value=value("subscription_id")/>
                    <input type="hidden" name="event_type" value=value("event_type")/>
                    <input type="hidden" name="since" value=value("since")/>
                    <input type="hidden" name="until" value=value("until")/>
                    <button type="submit">"Replay every dead message that matches the filter"</button>
                </ActionForm>
            </Changes>
            <Suspense fallback=|| ()>
                {move || Suspend::new(async move {
                    page.await.map(|(page, filtered)| dead_table(page, filtered)).unwrap_or_else(load_error)
                })}
            </Suspense>
        </Frame>
    }
}

fn dead_table(page: Page<LogEntry>, filtered: bool) -> AnyView {
    if page.data.is_empty() && !filtered {
        return view! { <p class="empty">"No dead letters: every message was delivered or is still being tried."</p> }
            .into_any();
    }
    message_table(page, filtered)
}

#[component]
pub fn MessagePage() -> impl IntoView {
    let params = use_params_map();
    let detail = Resource::new(move || params.read().get("id").unwrap_or_default(), get_message);
    let replay = ServerAction::<ReplayMessage>::new();
    view! {
        <Frame title="Message">
            <Notice key="replayed" text="Replayed: the message is due now, with the same id."/>
            <Notice key="sent" text="A test event was published to this subscription."/>
            {action_error(replay.value())}
            <Suspense fallback=|| ()>
                {move || Suspend::new(async move {
                    detail.await.map(|d| message_view(d, replay)).unwrap_or_else(load_error)
                })}
            </Suspense>
        </Frame>
    }
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

fn message_view(view: MessageView, replay: ServerAction<ReplayMessage>) -> AnyView {
    let MessageView { detail: d, owners: Owners { subscription_name, endpoint_url, customer_name } } = view;
    let m = d.message;
    let replayable = matches!(m.state, MessageState::Dead | MessageState::Delivered);
    view! {
        <dl class="facts">
            <dt>"Id"</dt><dd><code>{m.id.clone()}</code></dd>
            <dt>"State"</dt><dd><Badge text=m.state.as_str().to_string()/>" "{m.dead_reason.clone().unwrap_or_default()}</dd>
            {customer_name.map(|name| view! { <dt>"Customer"</dt><dd>{name}</dd> })}
            <dt>"Subscription"</dt><dd>{match subscription_name {
                Some(name) => view! { <a href=format!("/subscriptions/{}", m.subscription_id)>{name}</a> }.into_any(),
                None => view! { <code>{m.subscription_id.clone()}</code>" (deleted)" }.into_any(),
            }}</dd>
            <dt>"Endpoint"</dt><dd class="url"><a href=format!("/endpoints/{}", m.endpoint_id)>{
                breakable(endpoint_url.as_deref().unwrap_or(&m.endpoint_id))
            }</a></dd>
            <dt>"Event type"</dt><dd>{m.event_type.clone()}</dd>
            <dt>"Created"</dt><dd>{time(&m.created_at)}</dd>
            <dt>"Delivered"</dt><dd>{maybe_time(&m.delivered_at)}</dd>
            <dt>"Next attempt"</dt><dd>{maybe_time(&m.next_attempt_at)}</dd>
        </dl>
        {replayable.then(|| {
            let id = m.id.clone();
            view! {
                <Changes>
                    {let id = id.clone();
                    view! {
                        <ActionForm action=replay>
                            <input type="hidden" name="id" value=id/>
                            <button type="submit">"Replay"</button>
                        </ActionForm>
                    }}
                </Changes>
            }
        })}
        <h2>"Event"</h2>
        <pre class="json">{pretty(&d.event)}</pre>
        <h2>{format!("Attempts ({})", d.attempts.len())}</h2>
        {if d.attempts.is_empty() { Some(view! { <p>"No attempt yet."</p> }) } else { None }}
        {series_views(d.attempts)}
    }
    .into_any()
}

/// The attempts by series: the first delivery's, then each replay's, each under its heading, so
/// that where a replay began is plain. The latest attempt opens its response.
fn series_views(attempts: Vec<Attempt>) -> impl IntoView {
    let mut series: Vec<(u32, Vec<Attempt>)> = Vec::new();
    for a in attempts {
        match series.last_mut() {
            Some((n, list)) if *n == a.series => list.push(a),
            _ => series.push((a.series, vec![a])),
        }
    }
    let several = series.len() > 1 || series.first().is_some_and(|(n, _)| *n > 0);
    let last = series.len();
    series
        .into_iter()
        .enumerate()
        .map(|(i, (n, list))| {
            let count = list.len();
            let latest = i + 1 == last;
            let heading = match n {
                0 => "First delivery".to_string(),
                n => format!("Replay {n}"),
            };
            let heading = if count == 1 { format!("{heading} · 1 attempt") } else { format!("{heading} · {count} attempts") };
            view! {
                <section class="series">
                    {several.then(|| view! { <h3>{heading}</h3> })}
                    {list.into_iter().enumerate().map(|(j, a)| attempt_view(a, latest && j + 1 == count, several)).collect_view()}
                </section>
            }
        })
        .collect_view()
}

/// One attempt; the latest one opens its response. An attempt that got no response (it could not
/// connect, or timed out) has none to open: its outcome and error say what happened.
fn attempt_view(a: Attempt, latest: bool, in_series: bool) -> impl IntoView {
    let status = a.status_code.map(|s| s.to_string()).unwrap_or_else(|| "no response".into());
    let response = a.status_code.is_some().then(|| {
        let (headers, body) = (pretty(&a.response_headers), a.response_body.clone().unwrap_or_default());
        view! {
            <details open=latest>
                <summary>"Response headers and body"</summary>
                <pre class="json">{headers}</pre>
                <pre class="body">{body}</pre>
            </details>
        }
    });
    view! {
        <article class="attempt">
            {
                let title = format!("#{} · {} · {} ms", a.number, time(&a.started_at), a.duration_ms);
                // Under a series' heading, one level down.
                if in_series { view! { <h4>{title}</h4> }.into_any() } else { view! { <h3>{title}</h3> }.into_any() }
            }
            <dl class="facts">
                <dt>"Outcome"</dt><dd><Badge text=a.outcome.as_str().to_string()/></dd>
                <dt>"Response status"</dt><dd>{status}</dd>
                <dt>"Error"</dt><dd>{a.error_kind.map(|k| k.as_str().to_string()).unwrap_or_else(|| "—".into())}" "{a.error_detail.clone().unwrap_or_default()}</dd>
                <dt>"Trace"</dt><dd><code class="trace">{a.trace_id.clone().unwrap_or_else(|| "—".into())}</code></dd>
            </dl>
            <details>
                <summary>"Request headers"</summary>
                <pre class="json">{pretty(&a.request_headers)}</pre>
            </details>
            {response}
        </article>
    }
}
