use leptos::prelude::*;
use leptos_router::hooks::{use_params_map, use_query_map};

use super::subscription_delivery::{DeliveryForm, delivery_facts};
use crate::ui::components::{
    Badge, Changes, CustomerField, Frame, NextPage, Notice, SelectField, action_error, breakable, load_error,
    span_text, time,
};
use crate::ui::server_fns::{
    CreateSubscription, RotateSecret, SendExample, SendTestEvent, SetSubscriptionStatus, UpdateSubscription,
    get_event_types, get_filter_preview, get_schedule, get_subscription, get_subscriptions,
};
use domain::dto::{FilterMatch, Page, Preview, Subscription};
use domain::states::SubscriptionStatus;

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
    let create = ServerAction::<CreateSubscription>::new();
    view! {
        <Frame title="Subscriptions">
            <Suspense fallback=|| ()>
                {move || Suspend::new(async move {
                    page.await.map(list).unwrap_or_else(load_error)
                })}
            </Suspense>
            <Changes>
                <h2 id="new">"New subscription"</h2>
                {action_error(create.value())}
                <ActionForm action=create attr:class="stacked">
                    <CustomerField/>
                    <SubscriptionFields values=FormValues::previewed().unwrap_or_else(FormValues::new_subscription)/>
                    <div class="actions">
                        <button type="submit">"Create subscription"</button>
                        {try_button("/subscriptions#new".into(), "preview", "Preview the schedule")}
                        {try_button("/subscriptions#new".into(), "filter_test", "Test the filter")}
                    </div>
                </ActionForm>
                <PreviewedSchedule/>
                <FilterPreview subscription_id=None/>
            </Changes>
        </Frame>
    }
}

fn list(page: Page<Subscription>) -> AnyView {
    if page.data.is_empty() {
        return view! { <p class="empty">"No subscriptions yet: create one below to start receiving events."</p> }
            .into_any();
    }
    view! {
        <table>
            <thead><tr><th scope="col">"Name"</th><th scope="col">"URL"</th><th scope="col">"Event types"</th><th scope="col">"Status"</th><th scope="col">"Created"</th></tr></thead>
            <tbody>
                {page.data.into_iter().map(|s| view! {
                    <tr>
                        <td data-label="Name"><a href=format!("/subscriptions/{}", s.id)>{s.name.clone()}</a></td>
                        <td class="url" data-label="URL">{breakable(&s.url)}</td>
                        <td class="type" data-label="Event types">{breakable(&s.event_types.join(", "))}</td>
                        <td data-label="Status"><Badge text=s.status.as_str().to_string()/></td>
                        <td class="when" data-label="Created">{time(&s.created_at)}</td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
        <NextPage next=page.next_cursor/>
    }
    .into_any()
}

/// The form's values: a subscription's, or those a preview carried in the URL.
#[derive(Clone, Default)]
struct FormValues {
    name: String,
    url: String,
    event_types: String,
    retry_policy: String,
    timeout_ms: String,
    binary: bool,
    filter: String,
    rate_limit_per_sec: String,
}

impl FormValues {
    fn of(sub: &Subscription) -> FormValues {
        FormValues {
            name: sub.name.clone(),
            url: sub.url.clone(),
            event_types: sub.event_types.join(", "),
            retry_policy: policy_text(&sub.retry_policy),
            timeout_ms: sub.timeout_ms.to_string(),
            binary: sub.content_mode.as_str() == "binary",
            filter: sub.filter.clone().unwrap_or_default(),
            rate_limit_per_sec: sub.rate_limit_per_sec.map(|n| n.to_string()).unwrap_or_default(),
        }
    }

    fn new_subscription() -> FormValues {
        FormValues { retry_policy: "event-grid".into(), timeout_ms: "30000".into(), ..FormValues::default() }
    }

    /// The values of a form whose schedule or filter is being tried, when the URL carries one.
    fn previewed() -> Option<FormValues> {
        let query = use_query_map();
        let q = query.read_untracked();
        q.get("preview").or_else(|| q.get("filter_test"))?;
        let get = |k: &str| q.get(k).unwrap_or_default();
        Some(FormValues {
            name: get("name"),
            url: get("url"),
            event_types: get("event_types"),
            retry_policy: get("retry_policy"),
            timeout_ms: get("timeout_ms"),
            binary: get("content_mode") == "binary",
            filter: get("filter"),
            rate_limit_per_sec: get("rate_limit_per_sec"),
        })
    }
}

/// The editable fields.
#[component]
fn SubscriptionFields(values: FormValues) -> impl IntoView {
    let FormValues { name, url, event_types, retry_policy, timeout_ms, binary, filter, rate_limit_per_sec } = values;
    let catalog = Resource::new(|| (), |_| get_event_types(None));
    view! {
        <label>"Name" <input name="name" value=name required/></label>
        <label>"URL" <input name="url" type="url" value=url required/></label>
        <label>"Event types (comma-separated; * for all but Herald's own, such as herald.message.dead, which must be listed)" <input name="event_types" value=event_types list="catalog-types" required/></label>
        <Suspense fallback=|| ()>
            {move || Suspend::new(async move {
                let mut names: Vec<String> = catalog.await.map(|p| p.data.into_iter().map(|t| t.name).collect()).unwrap_or_default();
                names.sort();
                names.dedup();
                (!names.is_empty()).then(|| view! {
                    <datalist id="catalog-types">{names.iter().map(|n| view! { <option value=n.clone()></option> }).collect_view()}</datalist>
                    <p class="hint">"In the event-type catalog: "{names.join(", ")}</p>
                })
            })}
        </Suspense>
        <label>"Retry policy (workfront, event-grid, eventarc, or a custom policy as JSON)"
            <input name="retry_policy" value=retry_policy/>
        </label>
        <label>"Timeout (ms, 1000 to 60000)" <input name="timeout_ms" type="number" min="1000" max="60000" value=timeout_ms/></label>
        <SelectField label="Content mode" name="content_mode" options=vec![("structured", "structured"), ("binary", "binary")]
            selected=if binary { "binary" } else { "structured" }/>
        <label>"Filter (optional): a CEL expression over the event, message, that must be true for it to be delivered, such as message.source.startsWith(\"/shop/eu\") && message.data.total > 100"
            <textarea name="filter" rows="3" maxlength="4096" spellcheck="false">{filter}</textarea>
        </label>
        <label>"Pace (optional): at most this many attempts a second to the endpoint, 1 to 10000; messages beyond it wait their turn"
            <input name="rate_limit_per_sec" type="number" min="1" max="10000" value=rate_limit_per_sec/>
        </label>
    }
}

/// What a "Test the filter" asked for: the customer's latest kept events of the form's types, each
/// with whether the filter matches it.
#[component]
fn FilterPreview(subscription_id: Option<String>) -> impl IntoView {
    let query = use_query_map();
    let asked = move || {
        let q = query.read();
        q.get("filter_test")?;
        Some((q.get("filter"), q.get("event_types"), q.get("customer_id"), subscription_id.clone()))
    };
    let preview = Resource::new(asked, |asked| async move {
        match asked {
            Some((filter, types, customer, sub)) => get_filter_preview(filter, types, customer, sub).await.map(Some),
            None => Ok(None),
        }
    });
    view! {
        <Suspense fallback=|| ()>
            {move || Suspend::new(async move {
                match preview.await {
                    Ok(Some(found)) => filter_table(found).into_any(),
                    Ok(None) => ().into_any(),
                    Err(e) => load_error(e),
                }
            })}
        </Suspense>
    }
}

fn filter_table(found: Vec<FilterMatch>) -> impl IntoView {
    let matching = found.iter().filter(|m| m.matches).count();
    let summary = if found.is_empty() {
        "No kept event of these types yet: publish one, then test again.".to_string()
    } else {
        format!("The filter matches {matching} of the latest {} kept events of these types.", found.len())
    };
    view! {
        <section class="preview" aria-label="Filter test">
            <p class="notice" role="status">"Test only: nothing is saved until you press the save button. "{summary}</p>
            <table>
                <caption>"The filter on the latest kept events of these types, newest first"</caption>
                <thead><tr><th scope="col">"Event"</th><th scope="col">"Type"</th><th scope="col">"Source"</th><th scope="col">"Published"</th><th scope="col">"Matches"</th></tr></thead>
                <tbody>
                    {found.into_iter().map(|m| view! {
                        <tr>
                            <td><a href=format!("/messages?event_id={}", m.event_id)><code>{m.event_id.clone()}</code></a></td>
                            <td class="type">{breakable(&m.event_type)}</td>
                            <td class="url">{breakable(&m.source)}</td>
                            <td>{time(&m.created_at)}</td>
                            <td>{match (m.matches, m.error) {
                                (true, _) => view! { <Badge text="matches".to_string()/> }.into_any(),
                                (false, None) => "no".into_any(),
                                (false, Some(error)) => format!("no: the filter failed ({error})").into_any(),
                            }}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
        </section>
    }
}

/// A button that shows the form again with what it asks for (`preview`: the policy's schedule;
/// `filter_test`: the filter on the latest kept events of its types), saving nothing: the form's
/// fields go to this page in the URL.
fn try_button(page: String, asks: &'static str, label: &'static str) -> impl IntoView {
    view! {
        <button type="submit" class="secondary" formmethod="get" formaction=page name=asks value="1">{label}</button>
    }
}

/// When each attempt starts if every one fails, as a table.
fn schedule_table(preview: Preview, caption: &'static str) -> impl IntoView {
    let last = preview.attempts.last().map(|a| a.offset_secs).unwrap_or(0.0);
    view! {
        <table class="schedule">
            <caption>{caption}</caption>
            <thead><tr><th scope="col">"Attempt"</th><th scope="col">"Starts after the first"</th></tr></thead>
            <tbody>
                {preview.attempts.into_iter().map(|a| view! {
                    <tr>
                        <td>{a.attempt}</td>
                        <td>{if a.attempt == 1 { "at once".to_string() } else { format!("+{}", span_text(a.offset_secs)) }}</td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
        <p class="hint">{format!(
            "The last attempt starts {} after the first; a message not delivered within {} of its publish ends dead (expired). Times assume each attempt fails at once, before the policy's jitter.",
            span_text(last), span_text(preview.ttl_secs as f64)
        )}</p>
    }
}

/// The schedule of the policy a preview carried, or why it cannot be shown.
#[component]
fn PreviewedSchedule() -> impl IntoView {
    let query = use_query_map();
    let policy = move || query.read().get("preview").and(query.read().get("retry_policy"));
    let schedule = Resource::new(policy, |policy| async move {
        match policy {
            Some(policy) => get_schedule(policy).await.map(Some),
            None => Ok(None),
        }
    });
    view! {
        <Suspense fallback=|| ()>
            {move || Suspend::new(async move {
                match schedule.await {
                    Ok(Some(preview)) => view! {
                        <section class="preview" aria-label="Schedule preview">
                            <p class="notice" role="status">"Preview only: nothing is saved until you press the save button."</p>
                            {schedule_table(preview, "Retry schedule of the previewed policy")}
                        </section>
                    }.into_any(),
                    Ok(None) => ().into_any(),
                    Err(e) => load_error(e),
                }
            })}
        </Suspense>
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
                        Ok(s) => {
                            let schedule = get_schedule(s.retry_policy.to_string()).await;
                            detail(s, schedule, update, status, rotate, test).into_any()
                        }
                        Err(e) => load_error(e),
                    }
                })}
            </Suspense>
        </Frame>
    }
}

fn detail(
    s: Subscription,
    schedule: Result<Preview, ServerFnError>,
    update: ServerAction<UpdateSubscription>,
    status: ServerAction<SetSubscriptionStatus>,
    rotate: ServerAction<RotateSecret>,
    test: ServerAction<SendTestEvent>,
) -> impl IntoView {
    let paused = s.status == SubscriptionStatus::Paused;
    let edited = s.clone();
    let (id_example, customer_example) = (s.id.clone(), s.customer_id.clone());
    view! {
        <dl class="facts">
            <dt>"Name"</dt><dd>{s.name.clone()}</dd>
            <dt>"Status"</dt><dd><Badge text=s.status.as_str().to_string()/></dd>
            <dt>"Id"</dt><dd><code>{s.id.clone()}</code></dd>
            {delivery_facts(&s)}
            <dt>"Retry policy"</dt><dd><code>{s.retry_policy.to_string()}</code></dd>
            <dt>"Filter"</dt><dd>{match s.filter.clone() {
                Some(filter) => view! { <code>{filter}</code> }.into_any(),
                None => "none: every event of its types".into_any(),
            }}</dd>
            <dt>"Endpoint"</dt><dd><a href=format!("/endpoints/{}", s.endpoint_id)>"Health and circuit of "{s.url.clone()}</a></dd>
            <dt>"Delivery log"</dt><dd><a href=format!("/messages?subscription_id={}", s.id)>"Messages of this subscription"</a></dd>
        </dl>
        <Changes>
            {subscription_actions(s.id.clone(), paused, status, rotate, test)}
            <SendExampleForm id=id_example.clone() customer_id=customer_example.clone()/>
        </Changes>
        <h2>"Retry schedule"</h2>
        {match schedule {
            Ok(preview) => schedule_table(preview, "When each attempt starts if every one fails").into_any(),
            Err(e) => load_error(e),
        }}
        <Changes>
            {edit_form(edited.clone(), update)}
        </Changes>
    }
}

/// Pause or resume, rotate the secret, send a test event.
fn subscription_actions(
    id: String,
    paused: bool,
    status: ServerAction<SetSubscriptionStatus>,
    rotate: ServerAction<RotateSecret>,
    test: ServerAction<SendTestEvent>,
) -> impl IntoView {
    let (id_status, id_rotate) = (id.clone(), id.clone());
    view! {
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
                <input type="hidden" name="id" value=id/>
                <button type="submit">"Send a test event"</button>
            </ActionForm>
        </div>
    }
}

/// The subscription's form, its previews, and its delivery settings.
fn edit_form(s: Subscription, update: ServerAction<UpdateSubscription>) -> impl IntoView {
    let (id, id_form, values) =
        (s.id.clone(), s.id.clone(), FormValues::previewed().unwrap_or_else(|| FormValues::of(&s)));
    view! {
        <h2 id="edit">"Edit"</h2>
        <ActionForm action=update attr:class="stacked">
            <input type="hidden" name="id" value=id_form.clone()/>
            <SubscriptionFields values=values/>
            <div class="actions">
                <button type="submit">"Save"</button>
                {try_button(format!("/subscriptions/{id_form}#edit"), "preview", "Preview the schedule")}
                {try_button(format!("/subscriptions/{id_form}#edit"), "filter_test", "Test the filter")}
            </div>
        </ActionForm>
        <PreviewedSchedule/>
        <FilterPreview subscription_id=Some(id)/>
        <DeliveryForm s=s/>
    }
}

/// Sends one of the customer's catalog examples to this subscription alone, when it has some.
#[component]
fn SendExampleForm(id: String, customer_id: String) -> impl IntoView {
    let send = ServerAction::<SendExample>::new();
    let catalog = Resource::new(|| (), |_| get_event_types(None));
    view! {
        {action_error(send.value())}
        <Suspense fallback=|| ()>
            {move || {
                let (id, customer_id) = (id.clone(), customer_id.clone());
                Suspend::new(async move {
                    let types = catalog.await.map(|page| page.data).unwrap_or_default();
                    let names: Vec<String> = types
                        .into_iter()
                        .filter(|t| t.customer_id == customer_id && t.example.is_some())
                        .map(|t| t.name)
                        .collect();
                    (!names.is_empty()).then(|| view! {
                        <ActionForm action=send attr:class="inline">
                            <input type="hidden" name="id" value=id/>
                            <label>"Example of the catalog's type "
                                <select name="event_type">
                                    {names.into_iter().map(|n| view! { <option value=n.clone()>{n.clone()}</option> }).collect_view()}
                                </select>
                            </label>
                            <button type="submit" class="secondary">"Send the example"</button>
                        </ActionForm>
                    })
                })
            }}
        </Suspense>
    }
}
