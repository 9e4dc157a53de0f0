use leptos::prelude::*;

use leptos_router::hooks::use_query_map;

use crate::ui::components::{Frame, action_error, not_found_status};
use crate::ui::server_fns::Login;

#[component]
pub fn LoginPage() -> impl IntoView {
    let login = ServerAction::<Login>::new();
    // A portal link that could not be opened (used, expired or unknown) leads here.
    let link_refused = use_query_map().read_untracked().get("link").is_some();
    view! {
        <leptos_meta::Title text="Log in · Herald"/>
        <main class="login">
            <h1>"Herald"</h1>
            {link_refused.then(|| view! {
                <p class="error" role="alert">"This link has expired or was already used. Ask for a new one, or log in."</p>
            })}
            <ActionForm action=login>
                <label>"Username" <input name="username" autocomplete="username" required/></label>
                <label>"Password" <input type="password" name="password" autocomplete="current-password" required/></label>
                {action_error(login.value())}
                <button type="submit">"Log in"</button>
            </ActionForm>
        </main>
    }
}

#[component]
pub fn NotFoundPage() -> impl IntoView {
    not_found_status();
    view! {
        <Frame title="Not found">
            <p>"There is nothing here."</p>
        </Frame>
    }
}
