use leptos::prelude::*;
use leptos_router::hooks::use_query_map;
use leptos_router::params::ParamsMap;

use std::collections::HashMap;

use crate::ui::components::{Frame, NextPage, action_error, choice_select, load_error, not_found_status, time};
use crate::ui::server_fns::{
    CreateApiKey, CreateCustomer, CreateUser, get_audit, get_customer_choices, get_customers, get_users, get_viewer,
    take_api_key_token,
};
use domain::dto::{AuditEntry, Choice, Customer, Page, User, Viewer};

#[component]
pub fn CustomersPage() -> impl IntoView {
    let query = use_query_map();
    let customers = Resource::new(move || query.read().get("cursor"), get_customers);
    let users = Resource::new(|| (), |_| get_users());
    let choices = Resource::new(|| (), |_| get_customer_choices());
    let new_key = Resource::new(
        move || query.read().get("key"),
        |key| async move {
            match key {
                Some(key) => take_api_key_token(key).await,
                None => Ok(None),
            }
        },
    );
    let create_customer = ServerAction::<CreateCustomer>::new();
    let create_key = ServerAction::<CreateApiKey>::new();
    let create_user = ServerAction::<CreateUser>::new();
    let viewer = Resource::new(|| (), |_| get_viewer());
    view! {
        <Frame title="Customers">
            <Suspense fallback=|| ()>
            {move || Suspend::new(async move {
            if let Some(refusal) = refusal_unless_admin(viewer.await.ok().flatten()) {
                return refusal;
            }
            let choices = choices.await.unwrap_or_default();
            let names: HashMap<String, String> = choices.iter().map(|c| (c.value.clone(), c.label.clone())).collect();
            let (key_choices, user_choices) = (choices.clone(), choices);
            view! {
            {created_notices(query)}
            {new_key_notice(new_key)}
            {customer_listing(customers)}
            <div class="forms">
                {new_customer_form(create_customer)}
                {new_key_form(create_key, key_choices)}
                {new_user_form(create_user, user_choices)}
            </div>
            <h2>"Users"</h2>
            {user_listing(users, names)}
            }.into_any()
            })}
            </Suspense>
        </Frame>
    }
}

/// Only admins get the customers page; anyone else sees "not found". The status is set here: the
/// data's own 404 may come after the response has started. (Nobody logged in is sent to the login
/// page by the frame instead.)
fn refusal_unless_admin(viewer: Option<Viewer>) -> Option<AnyView> {
    match viewer {
        Some(v) if v.is_admin() => None,
        signed_in => {
            if signed_in.is_some() {
                not_found_status();
            }
            Some(view! { <p>"There is nothing here."</p> }.into_any())
        }
    }
}

/// What the last form submitted created, as the redirect's query names it.
fn created_notices(query: Memo<ParamsMap>) -> impl IntoView {
    view! {
        {move || query.read().get("created").map(|id| view! { <p class="notice" role="status">{format!("Customer {id} created.")}</p> })}
        {move || query.read().get("user").map(|u| view! { <p class="notice" role="status">{format!("User {u} created.")}</p> })}
    }
}

/// A new API key's token, shown once after the key is created.
fn new_key_notice(new_key: Resource<Result<Option<String>, ServerFnError>>) -> impl IntoView {
    view! {
        <Suspense fallback=|| ()>
            {move || Suspend::new(async move {
                new_key.await.ok().flatten().map(|token| view! {
                    <div class="notice" role="status">
                        <p>"The new API key's token. Copy it now: it is shown only this once. Send it as "<code>"Authorization: Bearer …"</code>"."</p>
                        <code class="secret">{token}</code>
                    </div>
                })
            })}
        </Suspense>
    }
}

/// The page of customers, once loaded.
fn customer_listing(customers: Resource<Result<Page<Customer>, ServerFnError>>) -> impl IntoView {
    view! {
        <Suspense fallback=|| ()>
            {move || Suspend::new(async move {
                customers.await.map(customer_table).unwrap_or_else(load_error)
            })}
        </Suspense>
    }
}

/// The form creating a customer.
fn new_customer_form(create_customer: ServerAction<CreateCustomer>) -> impl IntoView {
    view! {
        <section>
            <h2>"New customer"</h2>
            {action_error(create_customer.value())}
            <ActionForm action=create_customer attr:class="stacked">
                <label>"Name" <input name="name" required/></label>
                <button type="submit">"Create customer"</button>
            </ActionForm>
        </section>
    }
}

/// The form creating an API key for a customer.
fn new_key_form(create_key: ServerAction<CreateApiKey>, key_choices: Vec<Choice>) -> impl IntoView {
    view! {
        <section>
            <h2>"New API key"</h2>
            {action_error(create_key.value())}
            <ActionForm action=create_key attr:class="stacked">
                <label>"Customer" {customer_select(key_choices)}</label>
                <label>"Key name" <input name="name" required/></label>
                <button type="submit">"Create API key"</button>
            </ActionForm>
        </section>
    }
}

/// The form creating a dashboard user, an admin or one customer's.
fn new_user_form(create_user: ServerAction<CreateUser>, user_choices: Vec<Choice>) -> impl IntoView {
    view! {
        <section>
            <h2>"New dashboard user"</h2>
            {action_error(create_user.value())}
            <ActionForm action=create_user attr:class="stacked">
                <label>"Username" <input name="username" required/></label>
                <label>"Password (8 or more characters)" <input name="password" type="password" required/></label>
                <label>"Role"
                    <select name="role">
                        <option value="customer">"customer"</option>
                        <option value="viewer">"viewer (sees a customer's pages, changes nothing)"</option>
                        <option value="admin">"admin"</option>
                    </select>
                </label>
                <label>"Customer (for a customer or viewer user)" {choice_select("customer_id", "none (an admin)", user_choices, String::new())}</label>
                <button type="submit">"Create user"</button>
            </ActionForm>
        </section>
    }
}

/// The dashboard users, once loaded, with their customers' names.
fn user_listing(users: Resource<Result<Vec<User>, ServerFnError>>, names: HashMap<String, String>) -> impl IntoView {
    view! {
        <Suspense fallback=|| ()>
            {move || {
                let names = names.clone();
                Suspend::new(async move {
                    users.await.map(|users| user_table(users, &names)).unwrap_or_else(load_error)
                })
            }}
        </Suspense>
    }
}

fn customer_table(page: Page<Customer>) -> AnyView {
    view! {
        <table>
            <thead><tr><th scope="col">"Name"</th><th scope="col">"Id"</th><th scope="col">"Created"</th><th scope="col">"Delivery log"</th></tr></thead>
            <tbody>
                {page.data.into_iter().map(|c| view! {
                    <tr>
                        <td>{c.name.clone()}</td><td><code>{c.id.clone()}</code></td><td>{time(&c.created_at)}</td>
                        <td><a href=format!("/messages?customer_id={}", c.id)>"Messages"</a></td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
        <NextPage next=page.next_cursor/>
    }
    .into_any()
}

/// A required choice of customer; says what to do first when there is none.
fn customer_select(choices: Vec<Choice>) -> AnyView {
    if choices.is_empty() {
        return view! { <span class="empty">"Create a customer first."</span> }.into_any();
    }
    view! {
        <select name="customer_id" required>
            {choices.into_iter().map(|c| view! { <option value=c.value>{c.label}</option> }).collect_view()}
        </select>
    }
    .into_any()
}

fn user_table(users: Vec<User>, names: &HashMap<String, String>) -> AnyView {
    view! {
        <table>
            <thead><tr><th scope="col">"Username"</th><th scope="col">"Role"</th><th scope="col">"Customer"</th><th scope="col">"Created"</th></tr></thead>
            <tbody>
                {users.into_iter().map(|u| {
                    let customer = u.customer_id.clone().map(|id| names.get(&id).cloned().unwrap_or(id)).unwrap_or_default();
                    view! {
                        <tr><td>{u.username.clone()}</td><td>{u.role.as_str()}</td><td>{customer}</td><td>{time(&u.created_at)}</td></tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
    }
    .into_any()
}

#[component]
pub fn AuditPage() -> impl IntoView {
    let query = use_query_map();
    let page = Resource::new(move || query.read().get("cursor"), get_audit);
    view! {
        <Frame title="Audit log">
            <Suspense fallback=|| ()>
                {move || Suspend::new(async move {
                    page.await.map(audit_table).unwrap_or_else(load_error)
                })}
            </Suspense>
        </Frame>
    }
}

fn audit_table(page: Page<AuditEntry>) -> AnyView {
    if page.data.is_empty() {
        return view! { <p>"Nothing has been recorded yet."</p> }.into_any();
    }
    view! {
        <table>
            <thead><tr><th scope="col">"When"</th><th scope="col">"Who"</th><th scope="col">"Action"</th><th scope="col">"Target"</th><th scope="col">"Detail"</th></tr></thead>
            <tbody>
                {page.data.into_iter().map(|a| view! {
                    <tr><td>{time(&a.at)}</td><td>{a.actor.clone()}</td><td>{a.action.clone()}</td><td><code>{a.target.clone()}</code></td><td><code>{a.detail.to_string()}</code></td></tr>
                }).collect_view()}
            </tbody>
        </table>
        <NextPage next=page.next_cursor/>
    }
    .into_any()
}
