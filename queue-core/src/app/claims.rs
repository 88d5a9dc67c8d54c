//! The app's claims, in its backend under a namespace of its own.

use super::QueueApp;
use crate::claims::Claims;
use crate::error::Error;

impl QueueApp {
    /// Claims in this app's Redis, under `<prefix>:<namespace>:`. Each call waits at most
    /// the app's command timeout. Fails with [`Error::InvalidOption`] for an empty
    /// namespace or one with `:`. An inline app keeps its claims in memory, by the same
    /// rules, so that a unit test of a route behind the idempotency layer needs no Redis.
    pub fn claims(&self, namespace: &str) -> Result<Claims, Error> {
        if namespace.is_empty() || namespace.contains(':') {
            return Err(Error::invalid(
                "namespace",
                format!("`{namespace}` must be non-empty and without ':'"),
            ));
        }
        let backend = self.backend();
        let base = format!("{}:{namespace}:", backend.prefix());
        Ok(Claims::new(backend.claims(base, self.command_timeout())))
    }
}
