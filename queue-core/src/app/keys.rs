//! Rotating the app's keyring while it runs.

use super::QueueApp;
use crate::encryption::Keyring;
use crate::error::Error;

impl QueueApp {
    /// Replaces the keyring every queue, worker and watcher of this app uses, at once:
    /// adds from now on are sealed with its current key, and what older keys sealed
    /// opens while they stay in it. A rotation without downtime gives every process the
    /// new key as an *older* one first, then makes it current everywhere (see the
    /// guide's encryption page).
    ///
    /// ```
    /// # async fn demo(app: queue_core::QueueApp) -> queue_core::Result<()> {
    /// use queue_core::encryption::Keyring;
    ///
    /// let rotated = Keyring::new("2027-01", [8; 32])?.with_older("2026-12", [7; 32])?;
    /// app.replace_keyring(rotated);
    /// # Ok(()) }
    /// ```
    pub fn replace_keyring(&self, keyring: Keyring) {
        tracing::info!(
            current = keyring.current_id(),
            keys = keyring.ids().count(),
            "keyring replaced"
        );
        self.inner.producer.keys.replace(keyring);
    }

    /// Reads the keyring again from the [`KeySource`](crate::encryption::KeySource) the
    /// app was built with ([`keyring_from`](crate::QueueAppBuilder::keyring_from)) and
    /// [replaces](Self::replace_keyring) it. Fails, keeping the keyring it has, when the
    /// source fails or the app has none.
    pub async fn reload_keyring(&self) -> Result<(), Error> {
        let Some(source) = &self.inner.key_source else {
            return Err(Error::invalid(
                "keyring_from",
                "this app was not built with a key source; replace its keyring with `replace_keyring`",
            ));
        };
        self.replace_keyring(source.keyring().await?);
        Ok(())
    }
}
