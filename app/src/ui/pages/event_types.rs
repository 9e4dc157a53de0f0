//! The event-type catalog: each type's description, the JSON Schema its events'
//! data must satisfy and an example; adding, changing and removing types.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use crate::ui::components::{Changes, CustomerField, Frame, NextPage, action_error, breakable, load_error, urlencode};
use crate::ui::server_fns::{
    CreateEventType, DeleteEventType, UpdateEventType, get_event_type, get_event_types, get_viewer,
};
use domain::dto::{EventType, Page};

/// A JSON document as the page shows it, indented.
fn pretty(value: &Option<serde_json::Value>) -> String {
    value.as_ref().map(|v| serde_json::to_string_pretty(v).unwrap_or_default()).unwrap_or_default()
}

#[component]
pub fn EventTypesPage() -> impl IntoView {
    let query = use_query_map();
    let page = Resource::new(move || query.read().get("cursor"), get_event_types);
    let viewer = Resource::new(|| (), |_| get_viewer());
    let create = ServerAction::<CreateEventType>::new();
    let remove = ServerAction::<DeleteEventType>::new();
    view! {
        <Frame title="Event types">
            {move || {
                let q = query.read();
                let said = |key: &str, what: &str| q.get(key).map(|name| format!("The type {name} is {what}."));
                said("created", "in the catalog").or_else(|| said("saved", "saved")).or_else(|| said("removed", "removed"))
                    .map(|text| view! { <p class="notice" role="status">{text}</p> })
            }}
            <p class="hint">"The types your events have. A type with a schema has every published event's data checked against it (JSON Schema, draft 2020-12): an event that breaks it is refused with 422, and nothing of its request is stored. A subscription's page sends a type's example to it alone."</p>
            {action_error(remove.value())}
            <Suspense fallback=|| ()>
                {move || Suspend::new(async move {
                    let v = viewer.await.ok().flatten();
                    let (admin, writable) = (v.as_ref().is_some_and(|v| v.is_admin()), v.is_some_and(|v| v.can_change()));
                    page.await.map(|page| list(page, admin, writable, remove)).unwrap_or_else(load_error)
                })}
            </Suspense>
            <Changes>
                <EditForm/>
                <h2 id="new">"New event type"</h2>
                {action_error(create.value())}
                <ActionForm action=create attr:class="stacked">
                    <CustomerField/>
                    <label>"Name (a CloudEvents type, such as order.created; herald. is reserved)" <input name="name" required maxlength="1024"/></label>
                    <TypeFields kind=None/>
                    <div class="actions"><button type="submit">"Add the type"</button></div>
                </ActionForm>
            </Changes>
        </Frame>
    }
}

/// The catalog; with the actions that change it when `writable`.
fn list(page: Page<EventType>, admin: bool, writable: bool, remove: ServerAction<DeleteEventType>) -> AnyView {
    if page.data.is_empty() {
        let text = if writable { "The catalog is empty: add a type below." } else { "The catalog is empty." };
        return view! { <p class="empty">{text}</p> }.into_any();
    }
    view! {
        <table class="catalog">
            <thead><tr>
                <th scope="col">"Name"</th>
                {admin.then(|| view! { <th scope="col">"Customer"</th> })}
                <th scope="col">"Description"</th><th scope="col">"Schema"</th><th scope="col">"Example"</th>{writable.then(|| view! { <th scope="col">"Actions"</th> })}
            </tr></thead>
            <tbody>
                {page.data.into_iter().map(|t| {
                    let change = format!("/event-types?edit={}&customer_id={}#edit", urlencode(&t.name), urlencode(&t.customer_id));
                    view! {
                        <tr>
                            <td class="type">{breakable(&t.name)}</td>
                            {admin.then(|| view! { <td><code>{t.customer_id.clone()}</code></td> })}
                            <td>{t.description.clone().unwrap_or_default()}</td>
                            <td><pre><code>{pretty(&t.schema)}</code></pre></td>
                            <td><pre><code>{pretty(&t.example)}</code></pre></td>
                            {writable.then(|| view! {
                                <td>
                                    <a href=change>"Change"<span class="visually-hidden">" "{t.name.clone()}</span></a>
                                    <ActionForm action=remove>
                                        <input type="hidden" name="name" value=t.name.clone()/>
                                        <input type="hidden" name="customer_id" value=t.customer_id.clone()/>
                                        <button type="submit" class="secondary">"Remove"<span class="visually-hidden">" "{t.name.clone()}</span></button>
                                    </ActionForm>
                                </td>
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

/// The fields a type can change, with the type's current values when it has some.
#[component]
fn TypeFields(kind: Option<EventType>) -> impl IntoView {
    let description = kind.as_ref().and_then(|t| t.description.clone()).unwrap_or_default();
    let (schema, example) = kind.as_ref().map(|t| (pretty(&t.schema), pretty(&t.example))).unwrap_or_default();
    view! {
        <label>"Description (optional)" <input name="description" value=description maxlength="1000"/></label>
        <label>"Schema of the data (optional): JSON Schema, draft 2020-12"
            <textarea name="schema" rows="8" spellcheck="false">{schema}</textarea>
        </label>
        <label>"Example of the data (optional): JSON that keeps the schema"
            <textarea name="example" rows="5" spellcheck="false">{example}</textarea>
        </label>
    }
}

/// The form that changes the type named in the URL (`?edit=`).
#[component]
fn EditForm() -> impl IntoView {
    let query = use_query_map();
    let asked = move || {
        let q = query.read();
        q.get("edit").map(|name| (name, q.get("customer_id")))
    };
    let kind = Resource::new(asked, |asked| async move {
        match asked {
            Some((name, customer)) => get_event_type(name, customer).await.map(Some),
            None => Ok(None),
        }
    });
    let update = ServerAction::<UpdateEventType>::new();
    view! {
        {action_error(update.value())}
        <Suspense fallback=|| ()>
            {move || Suspend::new(async move {
                match kind.await {
                    Ok(Some(t)) => view! {
                        <h2 id="edit">{format!("Change {}", t.name)}</h2>
                        <ActionForm action=update attr:class="stacked">
                            <input type="hidden" name="name" value=t.name.clone()/>
                            <input type="hidden" name="customer_id" value=t.customer_id.clone()/>
                            <TypeFields kind=Some(t)/>
                            <p class="hint">"A field left empty is removed."</p>
                            <div class="actions"><button type="submit">"Save"</button></div>
                        </ActionForm>
                    }.into_any(),
                    Ok(None) => ().into_any(),
                    Err(e) => load_error(e),
                }
            })}
        </Suspense>
    }
}
