use leptos::prelude::*;

use crate::domain::dto::{MinuteCount, Overview};
use crate::ui::components::{Badge, Frame, load_error, maybe_time};
use crate::ui::server_fns::get_overview;

#[component]
pub fn OverviewPage() -> impl IntoView {
    let overview = Resource::new(|| (), |_| get_overview());
    view! {
        <Frame title="Overview">
            <Suspense fallback=|| ()>
                {move || Suspend::new(async move {
                    match overview.await {
                        Ok(o) => overview_view(o).into_any(),
                        Err(e) => load_error(e),
                    }
                })}
            </Suspense>
        </Frame>
    }
}

fn overview_view(o: Overview) -> impl IntoView {
    let troubled = o.troubled_endpoints.clone();
    view! {
        <section aria-labelledby="counts">
            <h2 id="counts">"Messages by state"</h2>
            <dl class="counts">
                {o.counts.into_iter().map(|(state, n)| view! {
                    <div><dt><a href=format!("/messages?state={}", state.as_str())><Badge text=state.as_str().to_string()/></a></dt><dd>{n}</dd></div>
                }).collect_view()}
            </dl>
        </section>
        <section aria-labelledby="chart">
            <h2 id="chart">"Deliveries per minute, last hour"</h2>
            {chart(o.per_minute)}
        </section>
        <section aria-labelledby="trouble">
            <h2 id="trouble">"Endpoints that are not closed"</h2>
            {if troubled.is_empty() {
                view! { <p>"Every endpoint is closed: deliveries flow normally."</p> }.into_any()
            } else {
                view! {
                    <table>
                        <thead><tr><th scope="col">"URL"</th><th scope="col">"State"</th><th scope="col">"Consecutive failures"</th><th scope="col">"Next probe"</th></tr></thead>
                        <tbody>
                            {troubled.into_iter().map(|e| view! {
                                <tr><td><a href="/endpoints">{e.url.clone()}</a></td><td><Badge text=e.state.as_str().to_string()/></td>
                                <td>{e.consecutive_failures}</td><td>{maybe_time(&e.next_probe_at)}</td></tr>
                            }).collect_view()}
                        </tbody>
                    </table>
                }.into_any()
            }}
        </section>
    }
}

/// A stacked bar per minute (successes below, failures above), drawn on the server.
fn chart(minutes: Vec<MinuteCount>) -> impl IntoView {
    const W: f64 = 600.0;
    const H: f64 = 160.0;
    let max = minutes.iter().map(|m| m.success + m.failure).max().unwrap_or(0).max(1) as f64;
    let bar = W / 60.0;
    let total_ok: u64 = minutes.iter().map(|m| m.success).sum();
    let total_failed: u64 = minutes.iter().map(|m| m.failure).sum();
    let bars = minutes
        .into_iter()
        .filter(|m| m.success + m.failure > 0)
        .map(|m| {
            let x = W - (m.minutes_ago as f64 + 1.0) * bar;
            let ok_h = m.success as f64 / max * H;
            let fail_h = m.failure as f64 / max * H;
            view! {
                <g>
                    <title>{format!("{} min ago: {} delivered, {} failed", m.minutes_ago, m.success, m.failure)}</title>
                    <rect class="ok" x=x + 1.0 y=H - ok_h width=bar - 2.0 height=ok_h/>
                    <rect class="failed" x=x + 1.0 y=H - ok_h - fail_h width=bar - 2.0 height=fail_h/>
                </g>
            }
        })
        .collect_view();
    view! {
        <figure class="chart">
            <svg viewBox=format!("0 0 {W} {H}") role="img" aria-label="Successful and failed attempts per minute over the last hour">
                {bars}
            </svg>
            <div class="axis"><span>"60 min ago"</span><span>"now"</span></div>
            <figcaption>
                <span class="key ok">"■"</span>" succeeded: " {total_ok} " · "
                <span class="key failed">"■"</span>" failed: " {total_failed} " · peak " {max as u64} " per minute"
            </figcaption>
        </figure>
    }
}
