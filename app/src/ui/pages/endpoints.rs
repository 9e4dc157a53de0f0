use std::collections::HashMap;

use chrono::DateTime;
use leptos::prelude::*;
use leptos_router::hooks::{use_params_map, use_query_map};

use crate::ui::components::{
    Badge, Changes, ChartSpan, Frame, NextPage, Notice, action_error, bar_chart, breakable, count_of, load_error,
    maybe_time, ms_text, time, urlencode,
};
use crate::ui::server_fns::{
    ReplayFailures, UnlockEndpoint, get_customer_choices, get_endpoint_health, get_endpoints, get_viewer,
};
use domain::dto::{Endpoint, EndpointHealth, FailureGroup, Page};
use domain::states::EndpointState;

const PER_HOUR: ChartSpan = ChartSpan {
    description: "Successful and failed attempts per hour over the last 24 hours",
    oldest: "24 h ago",
    unit: "hour",
    unit_short: "h",
};

#[component]
pub fn EndpointsPage() -> impl IntoView {
    let query = use_query_map();
    let page = Resource::new(move || query.read().get("cursor"), get_endpoints);
    let viewer = Resource::new(|| (), |_| get_viewer());
    let customers = Resource::new(|| (), |_| get_customer_choices());
    let unlock = ServerAction::<UnlockEndpoint>::new();
    view! {
        <Frame title="Endpoints">
            {move || query.read().get("unlocked").map(|id| view! {
                <p class="notice" role="status">{format!("The endpoint is unlocked ({id}): its circuit is closed, and its held messages are delivered or ended as you chose.")}</p>
            })}
            {action_error(unlock.value())}
            <Suspense fallback=|| ()>
                {move || Suspend::new(async move {
                    let admin = viewer.await.ok().flatten().is_some_and(|v| v.is_admin());
                    let names: HashMap<String, String> =
                        customers.await.unwrap_or_default().into_iter().map(|c| (c.value, c.label)).collect();
                    match page.await {
                        Ok(p) => table(p, admin.then_some(names), unlock).into_any(),
                        Err(e) => load_error(e),
                    }
                })}
            </Suspense>
        </Frame>
    }
}

fn rate(e: &Endpoint) -> String {
    if e.window_attempts == 0 {
        "—".into()
    } else {
        format!("{:.0} % of {}", e.window_failures as f64 * 100.0 / e.window_attempts as f64, e.window_attempts)
    }
}

/// Unlock, with a choice of what becomes of the messages the lock held.
#[component]
fn UnlockForm(action: ServerAction<UnlockEndpoint>, id: String, #[prop(optional)] from: &'static str) -> impl IntoView {
    let choice = format!("backlog-{id}");
    let minutes = format!("older-{id}");
    view! {
        <ActionForm action=action attr:class="unlock">
            <input type="hidden" name="id" value=id.clone()/>
            <input type="hidden" name="from" value=from/>
            <label for=choice.clone()>"Held messages"</label>
            <select id=choice name="backlog">
                <option value="deliver" selected>"deliver them"</option>
                <option value="dead">"end them dead"</option>
                <option value="dead_older_than">"end those older than…"</option>
            </select>
            <label for=minutes.clone()>"minutes"</label>
            <input id=minutes name="older_than_minutes" type="number" min="1" max="5270400" inputmode="numeric"/>
            <button type="submit">"Unlock"</button>
        </ActionForm>
    }
}

/// The endpoints; for the admin (`customers` given, by id) with their customer and Unlock.
fn table(
    page: Page<Endpoint>,
    customers: Option<HashMap<String, String>>,
    unlock: ServerAction<UnlockEndpoint>,
) -> impl IntoView {
    let admin = customers.is_some();
    let customers = customers.unwrap_or_default();
    if page.data.is_empty() {
        return view! { <p class="empty">"No endpoints yet: each subscription's URL gets one. "<a href="/subscriptions">"Create a subscription"</a>" to start."</p> }.into_any();
    }
    view! {
        <table>
            <thead>
                <tr>
                    {admin.then(|| view! { <th scope="col">"Customer"</th> })}
                    <th scope="col">"URL"</th><th scope="col">"State"</th><th scope="col">"Consecutive failures"</th>
                    <th scope="col">"Failure rate (window)"</th><th scope="col">"Last success"</th>
                    <th scope="col">"Next probe"</th>{admin.then(|| view! { <th scope="col">"Action"</th> })}
                </tr>
            </thead>
            <tbody>
                {page.data.into_iter().map(|e| {
                    let can_unlock = admin && e.state != EndpointState::Closed;
                    let id = e.id.clone();
                    view! {
                        <tr id=e.id.clone()>
                            {admin.then(|| view! {
                                <td data-label="Customer">{customers.get(&e.customer_id).cloned().unwrap_or_else(|| e.customer_id.clone())}</td>
                            })}
                            <td class="url" data-label="URL"><a href=format!("/endpoints/{}", urlencode(&e.id))>{breakable(&e.url)}</a></td>
                            <td data-label="State"><Badge text=e.state.as_str().to_string()/></td>
                            <td data-label="Consecutive failures">{e.consecutive_failures}</td>
                            <td data-label="Failure rate">{rate(&e)}</td>
                            <td class="when" data-label="Last success">{maybe_time(&e.last_success_at)}</td>
                            <td class="when" data-label="Next probe">{maybe_time(&e.next_probe_at)}</td>
                            {admin.then(|| view! {
                                <td>{can_unlock.then(|| view! {
                                    <UnlockForm action=unlock id=id.clone()/>
                                })}</td>
                            })}
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
        <NextPage next=page.next_cursor/>
    }
    .into_any()
}

#[component]
pub fn EndpointPage() -> impl IntoView {
    let params = use_params_map();
    let health = Resource::new(move || params.read().get("id").unwrap_or_default(), get_endpoint_health);
    let viewer = Resource::new(|| (), |_| get_viewer());
    let unlock = ServerAction::<UnlockEndpoint>::new();
    let replay = ServerAction::<ReplayFailures>::new();
    view! {
        <Frame title="Endpoint">
            <Notice key="unlocked" text="Unlocked: the circuit is closed, and the held messages are delivered or ended as you chose."/>
            {action_error(unlock.value())}
            {action_error(replay.value())}
            <Suspense fallback=|| ()>
                {move || Suspend::new(async move {
                    let admin = viewer.await.ok().flatten().is_some_and(|v| v.is_admin());
                    match health.await {
                        Ok(h) => health_view(h, admin, unlock, replay).into_any(),
                        Err(e) => load_error(e),
                    }
                })}
            </Suspense>
        </Frame>
    }
}

fn percent(part: u64, whole: u64) -> String {
    if whole == 0 { "—".into() } else { format!("{:.1} %", part as f64 * 100.0 / whole as f64) }
}

fn health_view(
    h: EndpointHealth,
    admin: bool,
    unlock: ServerAction<UnlockEndpoint>,
    replay: ServerAction<ReplayFailures>,
) -> impl IntoView {
    let e = h.endpoint;
    let measured = match (h.deliveries_measured, h.deliveries_capped) {
        (0, _) => "no delivery in the last 24 h".to_string(),
        (n, false) => format!("over {n} deliveries"),
        (n, true) => format!("over {n} deliveries since the time above"),
    };
    let id = e.id.clone();
    view! {
        <dl class="facts">
            <dt>"URL"</dt><dd class="url">{breakable(&e.url)}</dd>
            {h.customer_name.map(|name| view! { <dt>"Customer"</dt><dd>{name}</dd> })}
            <dt>"State"</dt><dd><Badge text=e.state.as_str().to_string()/></dd>
            <dt>"Subscriptions"</dt>
            <dd>{if h.subscriptions.is_empty() {
                view! { <span class="muted">"none now"</span> }.into_any()
            } else {
                h.subscriptions.into_iter().map(|s| view! {
                    <a class="listed" href=format!("/subscriptions/{}", s.value)>{s.label}</a>
                }).collect_view().into_any()
            }}</dd>
            <dt>"Consecutive failures"</dt><dd>{e.consecutive_failures}</dd>
            <dt>"Breaker window"</dt><dd>{format!("{} failed of {} attempts", e.window_failures, e.window_attempts)}</dd>
            <dt>"Last success"</dt><dd>{maybe_time(&e.last_success_at)}</dd>
            <dt>"Last failure"</dt><dd>{maybe_time(&e.last_failure_at)}</dd>
            <dt>"Next probe"</dt><dd>{maybe_time(&e.next_probe_at)}</dd>
        </dl>
        {(admin && e.state != EndpointState::Closed).then(|| view! {
            <h2>"Unlock"</h2>
            <UnlockForm action=unlock id=id.clone() from="endpoint"/>
        })}
        <h2 id="health">"Last 24 hours"</h2>
        <dl class="counts">
            <div><dt>"Attempts"</dt><dd>{h.attempts}</dd></div>
            <div><dt>"Success rate"</dt><dd>{percent(h.succeeded, h.attempts)}</dd></div>
            <div><dt>"Time to deliver, p50"</dt><dd>{h.p50_ms.map(ms_text).unwrap_or_else(|| "—".into())}</dd></div>
            <div><dt>"Time to deliver, p95"</dt><dd>{h.p95_ms.map(ms_text).unwrap_or_else(|| "—".into())}</dd></div>
        </dl>
        <p class="hint">
            {h.attempts_capped.then(|| {
                let since = h.counted_since_ms.and_then(DateTime::from_timestamp_millis).map(|t| time(&t)).unwrap_or_default();
                format!("Counted since {since}: the page reads this customer's latest attempts only, and earlier ones of the 24 hours are not counted. ")
            })}
            {format!("Time to deliver runs from publish (or replay, or resume) to the successful response, {measured}.")}
        </p>
        {bar_chart(h.hourly, &PER_HOUR)}
        <h2 id="failures">"Failures by kind"</h2>
        {if h.failures.is_empty() {
            view! { <p class="empty">"No failed attempt in the last 24 hours."</p> }.into_any()
        } else {
            view! {
                <div class="groups">
                    {h.failures.into_iter().enumerate().map(|(i, g)| failure_group(g, i == 0, id.clone(), replay)).collect_view()}
                </div>
            }.into_any()
        }}
    }
}

/// One kind of failure; the most frequent shows its latest response body open.
fn failure_group(
    g: FailureGroup,
    open: bool,
    endpoint_id: String,
    replay: ServerAction<ReplayFailures>,
) -> impl IntoView {
    let latest = DateTime::from_timestamp_millis(g.latest_ms).map(|t| time(&t)).unwrap_or_default();
    let attempts = count_of(g.count, "attempt", "attempts");
    let dead = g.dead_messages;
    view! {
        <article class="group">
            <h3><span class="kind">{g.label.clone()}</span>" · "{attempts}</h3>
            <p>"Latest at "{latest}
                {g.latest_message_id.map(|m| view! { ", message "<a href=format!("/messages/{m}")><code>{m.clone()}</code></a> })}
            </p>
            <details open=open>
                <summary>"Latest response body"</summary>
                <pre class="body">{g.latest_body.unwrap_or_else(|| "(no body)".into())}</pre>
            </details>
            {if dead == 0 {
                view! { <p class="muted">"No message died of it."</p> }.into_any()
            } else {
                let label = format!("Replay its {}", count_of(dead, "dead message", "dead messages"));
                let kind = g.kind;
                view! {
                    <Changes>
                        {let (id, kind, label) = (endpoint_id.clone(), kind.clone(), label.clone());
                        view! {
                            <ActionForm action=replay>
                                <input type="hidden" name="id" value=id/>
                                <input type="hidden" name="kind" value=kind/>
                                <button type="submit">{label}</button>
                            </ActionForm>
                        }}
                    </Changes>
                }.into_any()
            }}
        </article>
    }
}
