use leptos::prelude::*;

use crate::ui::components::{Frame, action_error, not_found_status};
use crate::ui::server_fns::Login;

#[component]
pub fn LoginPage() -> impl IntoView {
    let login = ServerAction::<Login>::new();
    view! {
        <leptos_meta::Title text="Log in · Herald"/>
        <main class="login">
            <h1>"Herald"</h1>
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
