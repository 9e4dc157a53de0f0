//! The dashboard: Leptos pages rendered on the server (every form works without
//! JavaScript), and the `Backend` trait through which their server functions
//! reach the services. The rules they show live in the `domain` crate.

#[cfg(any(feature = "ssr", feature = "hydrate"))]
pub mod ui;
