use leptos::prelude::*;
use leptos_router::hooks::{use_params_map, use_query_map};
use serde_json::Value;

use crate::domain::dto::{Attempt, LogFilter, Message, MessageDetail, Page};
use crate::domain::states::MessageState;
use crate::ui::components::{Badge, Frame, NextPage, Notice, action_error, load_error, maybe_time, time};
use crate::ui::server_fns::{ReplayDead, ReplayMessage, get_message, get_messages};

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
    view! {
        <form method="get" class="filters" role="search">
            <label>"Event id" <input name="event_id" value=value("event_id")/></label>
            <label>"Subscription id" <input name="subscription_id" value=value("subscription_id")/></label>
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

fn message_table(page: Page<Message>) -> AnyView {
    if page.data.is_empty() {
        return view! { <p>"No messages match."</p> }.into_any();
    }
    view! {
        <table>
            <thead>
                <tr>
                    <th scope="col">"Message"</th><th scope="col">"Event type"</th><th scope="col">"State"</th>
                    <th scope="col">"Attempts"</th><th scope="col">"Last status"</th><th scope="col">"Created"</th>
                    <th scope="col">"Next attempt"</th>
                </tr>
            </thead>
            <tbody>
                {page.data.into_iter().map(|m| view! {
                    <tr>
                        <td><a href=format!("/messages/{}", m.id)>{m.id.clone()}</a></td>
                        <td>{m.event_type.clone()}</td>
                        <td><Badge text=m.state.as_str().to_string()/>" "{m.dead_reason.clone().unwrap_or_default()}</td>
                        <td>{m.attempt_count}</td>
                        <td>{m.last_status.map(|s| s.to_string()).unwrap_or_else(|| "—".into())}</td>
                        <td>{time(&m.created_at)}</td>
                        <td>{maybe_time(&m.next_attempt_at)}</td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
        <NextPage next=page.next_cursor/>
    }
    .into_any()
}

#[component]
pub fn MessagesPage() -> impl IntoView {
    let page = Resource::new(filter_from_query(None), |(filter, cursor)| get_messages(filter, cursor));
    view! {
        <Frame title="Delivery log">
            <FilterForm with_state=true/>
            <Suspense fallback=|| ()>
                {move || Suspend::new(async move {
                    page.await.map(message_table).unwrap_or_else(load_error)
                })}
            </Suspense>
        </Frame>
    }
}

#[component]
pub fn DeadLettersPage() -> impl IntoView {
    let page = Resource::new(filter_from_query(Some("dead")), |(filter, cursor)| get_messages(filter, cursor));
    let replay = ServerAction::<ReplayDead>::new();
    let query = use_query_map();
    let value = move |k: &str| query.read_untracked().get(k).unwrap_or_default();
    view! {
        <Frame title="Dead letters">
            {move || query.read().get("replayed").map(|n| view! {
                <p class="notice" role="status">{
                    if n == "1" { "1 dead message was replayed: it is due now.".to_string() }
                    else { format!("{n} dead messages were replayed: they are due now.") }
                }</p>
            })}
            {action_error(replay.value())}
            <FilterForm with_state=false/>
            <ActionForm action=replay attr:class="bulk">
                <input type="hidden" name="subscription_id" value=value("subscription_id")/>
                <input type="hidden" name="event_type" value=value("event_type")/>
                <input type="hidden" name="since" value=value("since")/>
                <input type="hidden" name="until" value=value("until")/>
                <button type="submit">"Replay every dead message that matches the filter"</button>
            </ActionForm>
            <Suspense fallback=|| ()>
                {move || Suspend::new(async move {
                    page.await.map(message_table).unwrap_or_else(load_error)
                })}
            </Suspense>
        </Frame>
    }
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

fn message_view(d: MessageDetail, replay: ServerAction<ReplayMessage>) -> AnyView {
    let m = d.message;
    let replayable = matches!(m.state, MessageState::Dead | MessageState::Delivered);
    view! {
        <dl class="facts">
            <dt>"Id"</dt><dd><code>{m.id.clone()}</code></dd>
            <dt>"State"</dt><dd><Badge text=m.state.as_str().to_string()/>" "{m.dead_reason.clone().unwrap_or_default()}</dd>
            <dt>"Subscription"</dt><dd><a href=format!("/subscriptions/{}", m.subscription_id)>{m.subscription_id.clone()}</a></dd>
            <dt>"Event type"</dt><dd>{m.event_type.clone()}</dd>
            <dt>"Created"</dt><dd>{time(&m.created_at)}</dd>
            <dt>"Delivered"</dt><dd>{maybe_time(&m.delivered_at)}</dd>
            <dt>"Next attempt"</dt><dd>{maybe_time(&m.next_attempt_at)}</dd>
        </dl>
        {replayable.then(|| view! {
            <ActionForm action=replay>
                <input type="hidden" name="id" value=m.id.clone()/>
                <button type="submit">"Replay"</button>
            </ActionForm>
        })}
        <h2>"Event"</h2>
        <pre class="json">{pretty(&d.event)}</pre>
        <h2>{format!("Attempts ({})", d.attempts.len())}</h2>
        {if d.attempts.is_empty() { Some(view! { <p>"No attempt yet."</p> }) } else { None }}
        {
            let last = d.attempts.len();
            d.attempts.into_iter().enumerate().map(|(i, a)| attempt_view(a, i + 1 == last)).collect_view()
        }
    }
    .into_any()
}

/// One attempt; the latest one opens its response.
fn attempt_view(a: Attempt, latest: bool) -> impl IntoView {
    let status = a.status_code.map(|s| s.to_string()).unwrap_or_else(|| "no response".into());
    view! {
        <article class="attempt">
            <h3>{format!("#{} · {} · {} ms", a.number, time(&a.started_at), a.duration_ms)}</h3>
            <dl class="facts">
                <dt>"Outcome"</dt><dd><Badge text=a.outcome.as_str().to_string()/></dd>
                <dt>"Response status"</dt><dd>{status}</dd>
                <dt>"Error"</dt><dd>{a.error_kind.map(|k| k.as_str().to_string()).unwrap_or_else(|| "—".into())}" "{a.error_detail.clone().unwrap_or_default()}</dd>
            </dl>
            <details>
                <summary>"Request headers"</summary>
                <pre class="json">{pretty(&a.request_headers)}</pre>
            </details>
            <details open=latest>
                <summary>"Response headers and body"</summary>
                <pre class="json">{pretty(&a.response_headers)}</pre>
                <pre class="body">{a.response_body.clone().unwrap_or_default()}</pre>
            </details>
        </article>
    }
}
