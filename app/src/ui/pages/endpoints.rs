use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use crate::domain::dto::{Endpoint, Page};
use crate::domain::states::EndpointState;
use crate::ui::components::{Badge, Frame, NextPage, action_error, load_error, maybe_time};
use crate::ui::server_fns::{UnlockEndpoint, get_endpoints, get_viewer};

#[component]
pub fn EndpointsPage() -> impl IntoView {
    let query = use_query_map();
    let page = Resource::new(move || query.read().get("cursor"), get_endpoints);
    let viewer = Resource::new(|| (), |_| get_viewer());
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
                    match page.await {
                        Ok(p) => table(p, admin, unlock).into_any(),
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
fn UnlockForm(action: ServerAction<UnlockEndpoint>, id: String) -> impl IntoView {
    let choice = format!("backlog-{id}");
    let minutes = format!("older-{id}");
    view! {
        <ActionForm action=action attr:class="unlock">
            <input type="hidden" name="id" value=id.clone()/>
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

fn table(page: Page<Endpoint>, admin: bool, unlock: ServerAction<UnlockEndpoint>) -> impl IntoView {
    if page.data.is_empty() {
        return view! { <p>"No endpoints yet: each subscription's URL gets one."</p> }.into_any();
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
                            {admin.then(|| view! { <td><code>{e.customer_id.clone()}</code></td> })}
                            <td class="url">{e.url.clone()}</td>
                            <td><Badge text=e.state.as_str().to_string()/></td>
                            <td>{e.consecutive_failures}</td>
                            <td>{rate(&e)}</td>
                            <td>{maybe_time(&e.last_success_at)}</td>
                            <td>{maybe_time(&e.next_probe_at)}</td>
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
