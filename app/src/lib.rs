pub mod domain;
#[cfg(any(feature = "ssr", feature = "hydrate"))]
pub mod ui;
