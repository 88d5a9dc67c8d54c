//! TLS settings for `rediss://` URLs: a private CA and client certificates (mTLS).

use std::fmt;

/// Certificates for a `rediss://` connection. Without it, the server certificate is
/// checked against the usual public roots.
///
/// ```
/// use queue_core::{QueueApp, connection::Tls};
///
/// let ca_pem = b"-----BEGIN CERTIFICATE-----\n...".to_vec();
/// let builder = QueueApp::builder()
///     .redis("rediss://redis.internal:6380")
///     .tls(Tls::new().root_cert_pem(ca_pem));
/// # let _ = builder;
/// ```
#[derive(Clone, Default)]
#[must_use = "TLS settings do nothing until they are given to `QueueAppBuilder::tls`"]
pub struct Tls {
    pub(crate) root_cert_pem: Option<Vec<u8>>,
    pub(crate) client_cert_pem: Option<(Vec<u8>, Vec<u8>)>,
}

impl Tls {
    /// No extra certificates.
    pub fn new() -> Self {
        Self::default()
    }

    /// Trust this CA (PEM) for the server's certificate, e.g. a private or self-signed CA.
    pub fn root_cert_pem(mut self, pem: Vec<u8>) -> Self {
        self.root_cert_pem = Some(pem);
        self
    }

    /// Present this client certificate and key (both PEM), for servers that require mTLS.
    pub fn client_cert_pem(mut self, cert: Vec<u8>, key: Vec<u8>) -> Self {
        self.client_cert_pem = Some((cert, key));
        self
    }
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls")
            .field("root_cert_pem", &self.root_cert_pem.as_ref().map(|_| "***"))
            .field(
                "client_cert_pem",
                &self.client_cert_pem.as_ref().map(|_| "***"),
            )
            .finish()
    }
}
