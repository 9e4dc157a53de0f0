//! A replay job's page: what it replays, its state and how many it replayed so far, with a
//! cancel while it runs. It works without JavaScript: the page is read again to see progress.

use leptos::prelude::*;
use leptos_router::hooks::use_params_map;

use crate::ui::components::{Badge, Changes, Frame, action_error, load_error, maybe_time, time};
use crate::ui::server_fns::{CancelReplay, get_replay};
use domain::dto::Replay;
use domain::states::ReplayState;

#[component]
pub fn ReplayPage() -> impl IntoView {
    let params = use_params_map();
    let job = Resource::new(move || params.read().get("id").unwrap_or_default(), get_replay);
    let cancel = ServerAction::<CancelReplay>::new();
    view! {
        <Frame title="Replay">
            {action_error(cancel.value())}
            <Suspense fallback=|| ()>
                {move || Suspend::new(async move { job.await.map(|j| replay_view(j, cancel)).unwrap_or_else(load_error) })}
            </Suspense>
        </Frame>
    }
}

fn replay_view(job: Replay, cancel: ServerAction<CancelReplay>) -> AnyView {
    let running = job.state == ReplayState::Running;
    let what = match job.kind.as_str() {
        "events" => "new messages for the window's events",
        _ => "dead messages due again",
    };
    view! {
        <dl class="facts">
            <dt>"Id"</dt><dd><code>{job.id.clone()}</code></dd>
            <dt>"State"</dt><dd><Badge text=job.state.as_str().to_string()/></dd>
            <dt>"Replayed"</dt><dd>{format!("{} {what}", job.replayed)}</dd>
            <dt>"Started"</dt><dd>{time(&job.created_at)}</dd>
            <dt>"Ended"</dt><dd>{maybe_time(&job.finished_at)}</dd>
        </dl>
        {running.then(|| {
            let id = job.id.clone();
            view! {
                <p>"The replay goes on in the background, whether or not this page stays open. "
                    <a href=format!("/replays/{}", job.id)>"Show its progress again"</a></p>
                <Changes>
                    {let id = id.clone();
                    view! {
                        <ActionForm action=cancel>
                            <input type="hidden" name="id" value=id/>
                            <button type="submit">"Cancel the replay"</button>
                        </ActionForm>
                    }}
                </Changes>
            }
        })}
        <h2>"Request"</h2>
        <pre class="json">{serde_json::to_string_pretty(&job.request).unwrap_or_default()}</pre>
    }
    .into_any()
}
