//! Pieces every page uses: the frame with its navigation, state badges,
//! notices, times, and the "next page" link.

use chrono::{DateTime, Utc};
use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use super::server_fns::{Logout, get_customer_choices, get_viewer};
use domain::dto::{Bucket, Choice, Viewer};

/// The logged-in user of this page, read once and shared with what the page holds.
#[derive(Clone, Copy)]
struct PageViewer(Resource<Result<Option<Viewer>, ServerFnError>>);

fn page_viewer() -> Resource<Result<Option<Viewer>, ServerFnError>> {
    match use_context::<PageViewer>() {
        Some(PageViewer(viewer)) => viewer,
        None => Resource::new(|| (), |_| get_viewer()),
    }
}

/// The page frame: navigation for the logged-in user, and the page's content.
/// Pages that need a login render their content only when `viewer` is known.
#[component]
pub fn Frame(title: &'static str, children: ChildrenFn) -> impl IntoView {
    let viewer = Resource::new(|| (), |_| get_viewer());
    provide_context(PageViewer(viewer));
    view! {
        <leptos_meta::Title text=format!("{title} · Herald")/>
        <header class="top">
            <a class="brand" href="/">"Herald"</a>
            <Suspense fallback=|| ()>
                {move || Suspend::new(async move {
                    viewer.await.ok().flatten().map(|v: Viewer| {
                        let admin = v.is_admin();
                        view! {
                            <nav aria-label="Main">
                                <a href="/">"Overview"</a>
                                <a href="/subscriptions">"Subscriptions"</a>
                                <a href="/messages">"Delivery log"</a>
                                <a href="/events">"Events"</a>
                                <a href="/event-types">"Event types"</a>
                                <a href="/endpoints">"Endpoints"</a>
                                <a href="/dead-letters">"Dead letters"</a>
                                {admin.then(|| view! {
                                    <a href="/admin/customers">"Customers"</a>
                                    <a href="/admin/audit">"Audit log"</a>
                                })}
                            </nav>
                            {who(v)}
                        }
                    })
                })}
            </Suspense>
        </header>
        <main>
            <h1>{title}</h1>
            {children()}
        </main>
    }
}

/// Who is logged in. A portal session names its customer and leads "Back" to the product that
/// opened it; it has no "Log out" (the product's own page ends it, or `POST /logout`).
fn who(v: Viewer) -> AnyView {
    let role = if v.can_change() { "" } else { " (view only)" };
    match v.portal {
        Some(portal) => view! {
            <div class="logout">
                <span class="who">{portal.customer_name} {role}</span>
                {portal.return_url.map(|url| view! { <a class="back" href=url>"Back"</a> })}
            </div>
        }
        .into_any(),
        None => {
            let logout = ServerAction::<Logout>::new();
            view! {
                <ActionForm action=logout attr:class="logout">
                    <span class="who">{v.username.clone()} " (" {v.role.as_str()} ")"</span>
                    <button type="submit">"Log out"</button>
                </ActionForm>
            }
            .into_any()
        }
    }
}

/// What only a role that may change things is shown: the forms that change state. A viewer
/// sees none of them (and the server refuses their actions all the same).
#[component]
pub fn Changes(children: ChildrenFn) -> impl IntoView {
    let viewer = page_viewer();
    view! {
        <Suspense fallback=|| ()>
            {move || {
                let children = children.clone();
                Suspend::new(async move {
                    viewer.await.ok().flatten().is_some_and(|v| v.can_change()).then(|| children())
                })
            }}
        </Suspense>
    }
}

/// The customer a new object is for: a choice for the admin, nothing for a customer (whose own it is).
#[component]
pub fn CustomerField() -> impl IntoView {
    let viewer = page_viewer();
    view! {
        <Suspense fallback=|| ()>
            {move || Suspend::new(async move {
                let admin = viewer.await.ok().flatten().is_some_and(|v| v.is_admin());
                let customers = if admin { get_customer_choices().await.unwrap_or_default() } else { Vec::new() };
                admin.then(|| view! {
                    <label>"Customer"
                        <select name="customer_id" required>
                            {customers.into_iter().map(|c| view! { <option value=c.value>{c.label}</option> }).collect_view()}
                        </select>
                    </label>
                })
            })}
        </Suspense>
    }
}

/// An endpoint's or a message's state as a labelled badge.
/// A labelled `<select>` of `(value, text)` options, `selected` chosen.
#[component]
pub fn SelectField(
    label: &'static str,
    name: &'static str,
    options: Vec<(&'static str, &'static str)>,
    selected: &'static str,
) -> impl IntoView {
    let options = options
        .into_iter()
        .map(|(value, text)| view! { <option value=value selected=value == selected>{text}</option> });
    view! { <label>{label} <select name=name>{options.collect_view()}</select></label> }
}

#[component]
pub fn Badge(text: String) -> impl IntoView {
    let class = format!("badge badge-{text}");
    view! { <span class=class>{text}</span> }
}

/// A notice shown after an action when the URL carries `key`.
#[component]
pub fn Notice(key: &'static str, text: &'static str) -> impl IntoView {
    let query = use_query_map();
    move || query.read().get(key).map(|_| view! { <p class="notice" role="status">{text}</p> })
}

/// A failed action's message (carried back in the URL when JavaScript is off).
pub fn action_error(
    value: impl Get<Value = Option<Result<(), ServerFnError>>> + Send + Sync + 'static,
) -> impl IntoView {
    move || {
        value.get().and_then(|r| r.err()).map(|e| {
            let text = match e {
                ServerFnError::ServerError(text) => text,
                other => other.to_string(),
            };
            view! { <p class="error" role="alert">{text}</p> }
        })
    }
}

/// Answers the page with 404 Not Found; the page itself says there is nothing here.
pub fn not_found_status() {
    #[cfg(feature = "ssr")]
    if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
        response.set_status(http::StatusCode::NOT_FOUND);
    }
}

/// A load error in place of the page's content.
pub fn load_error(e: ServerFnError) -> AnyView {
    let text = match e {
        ServerFnError::ServerError(text) => text,
        other => other.to_string(),
    };
    view! { <p class="error" role="alert">{text}</p> }.into_any()
}

/// A time on one line: its spaces do not break.
pub fn time(t: &DateTime<Utc>) -> String {
    t.format("%Y-%m-%d\u{a0}%H:%M:%S\u{a0}UTC").to_string()
}

/// An id as short as its kind and last eight characters (`msg_…BHH7GN40`); a ULID's first
/// characters are its time, alike in every row of a page.
pub fn short_id(id: &str) -> String {
    let Some((kind, rest)) = id.split_once('_') else { return id.to_string() };
    match rest.char_indices().rev().nth(7) {
        Some((at, _)) if at > 0 => format!("{kind}_…{}", &rest[at..]),
        _ => id.to_string(),
    }
}

/// An id as a link: short to the eye, whole in its title, to a screen reader and to a search
/// of the page; the page it leads to shows it whole.
#[component]
pub fn IdLink(href: String, id: String) -> impl IntoView {
    let (short, title) = (short_id(&id), id.clone());
    view! {
        <a href=href title=title><span aria-hidden="true">{short}</span><span class="visually-hidden">{id}</span></a>
    }
}

/// Text that wraps only after a separator (`/`, `.`, `?`, `&`, `=`, `-`, `_`, `:`, `,`), as URLs,
/// event types and lists of them read, never inside a word.
pub fn breakable(text: &str) -> impl IntoView + use<> {
    let mut parts = Vec::new();
    let mut start = 0;
    for (i, c) in text.char_indices() {
        if "/.?&=-_:,".contains(c) {
            parts.push(text[start..i + c.len_utf8()].to_string());
            start = i + c.len_utf8();
        }
    }
    parts.push(text[start..].to_string());
    parts.into_iter().map(|part| view! { {part}<wbr/> }).collect_view()
}

pub fn maybe_time(t: &Option<DateTime<Utc>>) -> String {
    t.as_ref().map(time).unwrap_or_else(|| "—".into())
}

/// A link to the next page, keeping the other query parameters.
#[component]
pub fn NextPage(next: Option<String>) -> impl IntoView {
    let query = use_query_map();
    next.map(|cursor| {
        let mut params: Vec<(String, String)> = query
            .read_untracked()
            .clone()
            .into_iter()
            .filter(|(k, _)| k != "cursor")
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        params.push(("cursor".into(), cursor));
        let qs = params.iter().map(|(k, v)| format!("{k}={}", urlencode(v))).collect::<Vec<_>>().join("&");
        view! { <p class="pager"><a rel="next" href=format!("?{qs}")>"Next page →"</a></p> }
    })
}

/// Said where a search stopped before its page filled (see `Page::searched_back_to`): how far
/// back it read, and how to go on or narrow it. `what` names the rows ("messages", "events").
#[component]
pub fn SearchStopped(at: Option<DateTime<Utc>>, what: &'static str) -> impl IntoView {
    at.map(|at| {
        view! {
            <p class="notice" role="status">
                "This page searched the "{what}" back to "{time(&at)}" and stopped there, so that it answers at once. "
                "Older "{what}" may match: the next page searches on, or a time window (Until), a subscription "
                "or a customer narrows the search."
            </p>
        }
    })
}

pub fn urlencode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// What a chart's bars stand for.
pub struct ChartSpan {
    /// The chart as a screen reader announces it.
    pub description: &'static str,
    /// The label under the oldest bar.
    pub oldest: &'static str,
    pub unit: &'static str,
    pub unit_short: &'static str,
}

/// A stacked bar per bucket (successes below, failures above), oldest on the
/// left, drawn on the server.
pub fn bar_chart(buckets: Vec<Bucket>, span: &ChartSpan) -> impl IntoView {
    const W: f64 = 600.0;
    const H: f64 = 160.0;
    let max = buckets.iter().map(|b| b.success + b.failure).max().unwrap_or(0).max(1) as f64;
    let bar = W / buckets.len().max(1) as f64;
    let total_ok: u64 = buckets.iter().map(|b| b.success).sum();
    let total_failed: u64 = buckets.iter().map(|b| b.failure).sum();
    let unit_short = span.unit_short;
    let bars = buckets
        .into_iter()
        .filter(|b| b.success + b.failure > 0)
        .map(|b| {
            let x = W - (b.ago as f64 + 1.0) * bar;
            let ok_h = b.success as f64 / max * H;
            let fail_h = b.failure as f64 / max * H;
            view! {
                <g>
                    <title>{format!("{} {unit_short} ago: {} succeeded, {} failed", b.ago, b.success, b.failure)}</title>
                    <rect class="ok" x=x + 1.0 y=H - ok_h width=(bar - 2.0).max(1.0) height=ok_h/>
                    <rect class="failed" x=x + 1.0 y=H - ok_h - fail_h width=(bar - 2.0).max(1.0) height=fail_h/>
                </g>
            }
        })
        .collect_view();
    view! {
        <figure class="chart">
            // Stretched to the figure's width, so the newest bar is at the right edge.
            <svg viewBox=format!("0 0 {W} {H}") preserveAspectRatio="none" role="img" aria-label=span.description>
                {bars}
            </svg>
            <div class="axis"><span>{span.oldest}</span><span>"now"</span></div>
            <figcaption>
                <span class="key ok">"■"</span>" succeeded: " {total_ok} " · "
                <span class="key failed">"■"</span>" failed: " {total_failed} " · peak " {max as u64} " per " {span.unit}
            </figcaption>
        </figure>
    }
}

/// A select of `choices` named `name`, with "any" (empty) first; the current
/// value stays selectable even when it is not among the choices.
pub fn choice_select(name: &'static str, any: &'static str, choices: Vec<Choice>, current: String) -> impl IntoView {
    let known = current.is_empty() || choices.iter().any(|c| c.value == current);
    let extra = (!known).then(|| view! { <option value=current.clone() selected=true>{current.clone()}</option> });
    view! {
        <select name=name>
            <option value="">{any}</option>
            {extra}
            {choices.into_iter().map(|c| {
                let selected = c.value == current;
                view! { <option value=c.value selected=selected>{c.label}</option> }
            }).collect_view()}
        </select>
    }
}

/// `n` things, in the singular or the plural: `1 message`, `3 messages`.
pub fn count_of(n: impl Into<u64>, one: &str, many: &str) -> String {
    match n.into() {
        1 => format!("1 {one}"),
        n => format!("{n} {many}"),
    }
}

/// A span of seconds as a person reads it: `0 s`, `1 min 25 s`, `2 h 5 min`, `3 d 4 h`.
pub fn span_text(secs: f64) -> String {
    let total = secs.round().max(0.0) as u64;
    let (d, h, m, s) = (total / 86_400, total / 3600 % 24, total / 60 % 60, total % 60);
    let parts: Vec<String> = match (d, h, m) {
        (0, 0, 0) => vec![format!("{s} s")],
        (0, 0, _) => vec![format!("{m} min"), format!("{s} s")],
        (0, _, _) => vec![format!("{h} h"), format!("{m} min")],
        _ => vec![format!("{d} d"), format!("{h} h")],
    };
    let parts: Vec<String> = parts.into_iter().filter(|p| !p.starts_with("0 ")).collect();
    if parts.is_empty() { "0 s".into() } else { parts.join(" ") }
}

/// Milliseconds as a person reads them: `850 ms`, `2.4 s`, then as [`span_text`].
pub fn ms_text(ms: i64) -> String {
    match ms {
        ..1_000 => format!("{} ms", ms.max(0)),
        1_000..60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        _ => span_text(ms as f64 / 1000.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_read_like_a_person_writes_them() {
        assert_eq!(span_text(0.0), "0 s");
        assert_eq!(span_text(10.4), "10 s");
        assert_eq!(span_text(85.0), "1 min 25 s");
        assert_eq!(span_text(120.0), "2 min");
        assert_eq!(span_text(7_500.0), "2 h 5 min");
        assert_eq!(span_text(86_400.0 * 3.0 + 3600.0 * 4.0 + 59.0), "3 d 4 h");
        assert_eq!(span_text(86_400.0), "1 d");
        assert_eq!(ms_text(850), "850 ms");
        assert_eq!(ms_text(2_449), "2.4 s");
        assert_eq!(ms_text(90_000), "1 min 30 s");
        assert_eq!(
            (count_of(1u64, "message", "messages"), count_of(0u64, "message", "messages")),
            ("1 message".into(), "0 messages".into())
        );
    }
}
