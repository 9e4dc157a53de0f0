//! The browser entry point: hydrates the server-rendered dashboard when built
//! for wasm32. The dashboard is complete without it (every page and form works
//! with JavaScript off), so Herald ships and tests the server-rendered HTML.

pub fn hydrate() {
    leptos::mount::hydrate_body(app::ui::App);
}
