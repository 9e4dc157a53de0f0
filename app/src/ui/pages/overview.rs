use leptos::prelude::*;

use crate::ui::components::{Badge, ChartSpan, Frame, bar_chart, breakable, load_error, maybe_time, urlencode};
use domain::dto::Overview;

const PER_MINUTE: ChartSpan = ChartSpan {
    description: "Successful and failed attempts per minute over the last hour",
    oldest: "60 min ago",
    unit: "minute",
    unit_short: "min",
};
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
            {bar_chart(o.per_minute, &PER_MINUTE)}
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
                                <tr><td class="url"><a href=format!("/endpoints/{}", urlencode(&e.id))>{breakable(&e.url)}</a></td><td><Badge text=e.state.as_str().to_string()/></td>
                                <td>{e.consecutive_failures}</td><td>{maybe_time(&e.next_probe_at)}</td></tr>
                            }).collect_view()}
                        </tbody>
                    </table>
                }.into_any()
            }}
        </section>
    }
}
