//! The one TLS crypto provider of every client Herald builds (deliveries,
//! OAuth2 tokens, OTLP export): ring, which the database driver uses too, so
//! the build compiles a single provider.

use std::sync::Once;

/// Makes ring the process's provider; safe to call any number of times, and
/// needed before the first HTTPS client is built.
pub fn install_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Fails only when a provider is already installed, which is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn clients_build_once_the_provider_is_installed() {
        super::install_provider();
        super::install_provider();
        assert!(rustls::crypto::CryptoProvider::get_default().is_some());
        // reqwest builds its TLS configuration here, and panics without a provider.
        reqwest::Client::builder().https_only(true).build().expect("an HTTPS client builds");
    }
}
