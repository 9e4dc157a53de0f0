use leptos::prelude::*;
use leptos_router::hooks::{use_params_map, use_query_map};

use crate::domain::dto::{Page, Subscription};
use crate::domain::states::SubscriptionStatus;
use crate::ui::components::{Badge, Frame, NextPage, Notice, action_error, load_error, time};
use crate::ui::server_fns::{
    CreateSubscription, RotateSecret, SendTestEvent, SetSubscriptionStatus, UpdateSubscription, get_subscription,
    get_subscriptions, get_viewer,
};

/// The retry policy as the form shows it: a preset's name, or the custom policy's JSON.
fn policy_text(policy: &serde_json::Value) -> String {
    match policy["kind"].as_str() {
        Some(kind @ ("workfront" | "event-grid" | "eventarc")) => kind.to_string(),
        _ => policy.to_string(),
    }
}

#[component]
pub fn SubscriptionsPage() -> impl IntoView {
    let query = use_query_map();
    let page = Resource::new(move || query.read().get("cursor"), get_subscriptions);
    let viewer = Resource::new(|| (), |_| get_viewer());
    let create = ServerAction::<CreateSubscription>::new();
    view! {
        <Frame title="Subscriptions">
            <Suspense fallback=|| ()>
                {move || Suspend::new(async move {
                    page.await.map(list).unwrap_or_else(load_error)
                })}
            </Suspense>
            <h2>"New subscription"</h2>
            {action_error(create.value())}
            <ActionForm action=create attr:class="stacked">
                <Suspense fallback=|| ()>
                    {move || Suspend::new(async move {
                        viewer.await.ok().flatten().filter(|v| v.is_admin()).map(|_| view! {
                            <label>"Customer id" <input name="customer_id" required/></label>
                        })
                    })}
                </Suspense>
                <SubscriptionFields sub=None/>
                <button type="submit">"Create subscription"</button>
            </ActionForm>
        </Frame>
    }
}

fn list(page: Page<Subscription>) -> AnyView {
    if page.data.is_empty() {
        return view! { <p>"No subscriptions yet."</p> }.into_any();
    }
    view! {
        <table>
            <thead><tr><th scope="col">"Name"</th><th scope="col">"URL"</th><th scope="col">"Event types"</th><th scope="col">"Status"</th><th scope="col">"Created"</th></tr></thead>
            <tbody>
                {page.data.into_iter().map(|s| view! {
                    <tr>
                        <td><a href=format!("/subscriptions/{}", s.id)>{s.name.clone()}</a></td>
                        <td class="url">{s.url.clone()}</td>
                        <td>{s.event_types.join(", ")}</td>
                        <td><Badge text=s.status.as_str().to_string()/></td>
                        <td>{time(&s.created_at)}</td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
        <NextPage next=page.next_cursor/>
    }
    .into_any()
}

/// The editable fields, empty for a new subscription.
#[component]
fn SubscriptionFields(sub: Option<Subscription>) -> impl IntoView {
    let name = sub.as_ref().map(|s| s.name.clone()).unwrap_or_default();
    let url = sub.as_ref().map(|s| s.url.clone()).unwrap_or_default();
    let types = sub.as_ref().map(|s| s.event_types.join(", ")).unwrap_or_default();
    let policy = sub.as_ref().map(|s| policy_text(&s.retry_policy)).unwrap_or_else(|| "event-grid".into());
    let timeout = sub.as_ref().map(|s| s.timeout_ms).unwrap_or(30_000);
    let binary = sub.as_ref().is_some_and(|s| s.content_mode.as_str() == "binary");
    view! {
        <label>"Name" <input name="name" value=name required/></label>
        <label>"URL" <input name="url" type="url" value=url required/></label>
        <label>"Event types (comma-separated; * for all but Herald's own, such as herald.message.dead, which must be listed)" <input name="event_types" value=types required/></label>
        <label>"Retry policy (workfront, event-grid, eventarc, or a custom policy as JSON)"
            <input name="retry_policy" value=policy/>
        </label>
        <label>"Timeout (ms, 1000 to 60000)" <input name="timeout_ms" type="number" min="1000" max="60000" value=timeout/></label>
        <label>"Content mode"
            <select name="content_mode">
                <option value="structured" selected=!binary>"structured"</option>
                <option value="binary" selected=binary>"binary"</option>
            </select>
        </label>
    }
}

#[component]
pub fn SubscriptionPage() -> impl IntoView {
    let params = use_params_map();
    let sub = Resource::new(move || params.read().get("id").unwrap_or_default(), get_subscription);
    let update = ServerAction::<UpdateSubscription>::new();
    let status = ServerAction::<SetSubscriptionStatus>::new();
    let rotate = ServerAction::<RotateSecret>::new();
    let test = ServerAction::<SendTestEvent>::new();
    view! {
        <Frame title="Subscription">
            <Notice key="created" text="The subscription is created."/>
            <Notice key="saved" text="Saved."/>
            <Notice key="rotated" text="A new secret is in place; the previous one keeps signing for 24 hours."/>
            {action_error(update.value())}
            {action_error(status.value())}
            {action_error(rotate.value())}
            {action_error(test.value())}
            <Suspense fallback=|| ()>
                {move || Suspend::new(async move {
                    match sub.await {
                        Ok(s) => detail(s, update, status, rotate, test).into_any(),
                        Err(e) => load_error(e),
                    }
                })}
            </Suspense>
        </Frame>
    }
}

fn detail(
    s: Subscription,
    update: ServerAction<UpdateSubscription>,
    status: ServerAction<SetSubscriptionStatus>,
    rotate: ServerAction<RotateSecret>,
    test: ServerAction<SendTestEvent>,
) -> impl IntoView {
    let paused = s.status == SubscriptionStatus::Paused;
    let (id_status, id_rotate, id_test, id_edit) = (s.id.clone(), s.id.clone(), s.id.clone(), s.id.clone());
    view! {
        <dl class="facts">
            <dt>"Name"</dt><dd>{s.name.clone()}</dd>
            <dt>"Status"</dt><dd><Badge text=s.status.as_str().to_string()/></dd>
            <dt>"Id"</dt><dd><code>{s.id.clone()}</code></dd>
            <dt>"Signing secret"</dt><dd><code class="secret">{s.secret.clone().unwrap_or_default()}</code></dd>
            <dt>"Retry policy"</dt><dd><code>{s.retry_policy.to_string()}</code></dd>
            <dt>"Delivery log"</dt><dd><a href=format!("/messages?subscription_id={}", s.id)>"Messages of this subscription"</a></dd>
        </dl>
        <div class="actions">
            <ActionForm action=status>
                <input type="hidden" name="id" value=id_status/>
                <input type="hidden" name="status" value=if paused { "active" } else { "paused" }/>
                <button type="submit">{if paused { "Resume" } else { "Pause" }}</button>
            </ActionForm>
            <ActionForm action=rotate>
                <input type="hidden" name="id" value=id_rotate/>
                <button type="submit">"Rotate secret"</button>
            </ActionForm>
            <ActionForm action=test>
                <input type="hidden" name="id" value=id_test/>
                <button type="submit">"Send a test event"</button>
            </ActionForm>
        </div>
        <h2>"Edit"</h2>
        <ActionForm action=update attr:class="stacked">
            <input type="hidden" name="id" value=id_edit/>
            <SubscriptionFields sub=Some(s)/>
            <button type="submit">"Save"</button>
        </ActionForm>
    }
}
