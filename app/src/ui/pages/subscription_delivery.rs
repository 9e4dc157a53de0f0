//! The subscription page's delivery section: how deliveries are signed, the extra headers they
//! carry and how Herald authenticates to the receiver. Its own form, posted, so that no secret
//! travels in a URL (the main form's "try" buttons submit by GET).

use leptos::prelude::*;

use crate::ui::components::{SelectField, action_error};
use crate::ui::server_fns::UpdateDelivery;
use domain::dto::{AuthView, Subscription};
use domain::states::SignatureScheme;

/// The facts: scheme and key (a signing secret behind a reveal), header names, the credentials'
/// kind and what is not secret.
pub fn delivery_facts(s: &Subscription) -> impl IntoView + use<> {
    let key = match (s.signature, s.public_key.clone(), s.secret.clone()) {
        (SignatureScheme::V1a, Some(public), _) => view! {
            <dt>"Public key (v1a, Ed25519)"</dt><dd><code class="secret">{public}</code></dd>
        }
        .into_any(),
        // Hidden until asked for, so that a glance over a shoulder does not take it; <details>
        // opens without JavaScript.
        (_, _, secret) => view! {
            <dt>"Signing secret (v1, HMAC-SHA256)"</dt>
            <dd><details class="reveal"><summary>"Show the secret"</summary>
                <code class="secret">{secret.unwrap_or_default()}</code>
            </details></dd>
        }
        .into_any(),
    };
    let headers = match s.header_names.is_empty() {
        true => "none".to_string(),
        false => s.header_names.join(", "),
    };
    view! {
        {key}
        <dt>"Extra headers"</dt><dd>{headers}</dd>
        <dt>"Authentication"</dt><dd>{auth_text(s.auth.as_ref())}</dd>
        <dt>"Pace"</dt><dd>{match s.rate_limit_per_sec {
            Some(n) => format!("at most {n} attempts a second"),
            None => "none".to_string(),
        }}</dd>
    }
}

fn auth_text(auth: Option<&AuthView>) -> String {
    match auth {
        None => "none".into(),
        Some(AuthView { kind, username: Some(username), .. }) if kind == "basic" => {
            format!("basic, as {username}")
        }
        Some(AuthView { kind, token_url: Some(url), client_id, scope, .. }) if kind == "oauth2" => {
            let scope = scope.as_deref().map(|s| format!(", scope {s}")).unwrap_or_default();
            format!("OAuth 2.0 client {} from {url}{scope}", client_id.as_deref().unwrap_or(""))
        }
        Some(AuthView { kind, .. }) => kind.clone(),
    }
}

/// The form that changes them. Secrets are never shown back: their fields start empty, and
/// "keep" leaves the stored credentials as they are.
#[component]
pub fn DeliveryForm(s: Subscription) -> impl IntoView {
    let update = ServerAction::<UpdateDelivery>::new();
    let headers = s.headers.clone().unwrap_or_default();
    let lines = headers.iter().map(|(name, value)| format!("{name}: {value}")).collect::<Vec<_>>().join("\n");
    let v1a = s.signature == SignatureScheme::V1a;
    let has_auth = s.auth.is_some();
    view! {
        <h2 id="delivery">"Headers, authentication and signature"</h2>
        {action_error(update.value())}
        <ActionForm action=update attr:class="stacked">
            <input type="hidden" name="id" value=s.id.clone()/>
            <label>"Extra headers, one a line as Name: value (at most 20; values are sealed at rest and masked in the delivery log)"
                <textarea name="headers" rows="3" spellcheck="false" autocomplete="off">{lines}</textarea>
            </label>
            <SelectField label="Signature" name="signature" options=vec![
                ("v1", "v1: HMAC-SHA256 with a shared secret"),
                ("v1a", "v1a: Ed25519, verified with a public key"),
            ] selected=if v1a { "v1a" } else { "v1" }/>
            <SelectField label="Authentication" name="auth_kind" options=vec![
                ("keep", "keep as it is"),
                ("none", "none"),
                ("bearer", "bearer token"),
                ("basic", "basic (user name and password)"),
                ("oauth2", "OAuth 2.0 client credentials"),
            ] selected=if has_auth { "keep" } else { "none" }/>
            <fieldset>
                <legend>"Credentials for the kind chosen (never shown again)"</legend>
                <label>"Bearer token" <input name="auth_token" type="password" autocomplete="off"/></label>
                <label>"User name (basic)" <input name="auth_username" autocomplete="off"/></label>
                <label>"Password (basic)" <input name="auth_password" type="password" autocomplete="off"/></label>
                <label>"Token URL (OAuth 2.0)" <input name="auth_token_url" type="url" autocomplete="off"/></label>
                <label>"Client id (OAuth 2.0)" <input name="auth_client_id" autocomplete="off"/></label>
                <label>"Client secret (OAuth 2.0)" <input name="auth_client_secret" type="password" autocomplete="off"/></label>
                <label>"Scope (OAuth 2.0, optional)" <input name="auth_scope" autocomplete="off"/></label>
            </fieldset>
            <div class="actions"><button type="submit">"Save headers, authentication and signature"</button></div>
        </ActionForm>
    }
}
