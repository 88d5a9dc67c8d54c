//! Claims: short-lived records in the app's Redis that the first caller of a key takes,
//! and whose outcome the later callers of the key read. queue-axum's idempotency layer
//! keeps a request's first answer in one. The records themselves are the backend's
//! (Redis, or memory for an inline app); this is their public face.

use std::time::Duration;

use crate::backend::ClaimStore;
pub use crate::backend::{Claim, ClaimToken};
use crate::error::Error;

/// Claims under one namespace of the app's Redis: `<prefix>:<namespace>:<key>`. Made by
/// [`QueueApp::claims`](crate::QueueApp::claims); cheap to clone.
///
/// ```no_run
/// use std::time::Duration;
/// use queue_core::claims::Claim;
///
/// # async fn demo(app: queue_core::QueueApp) -> queue_core::Result<()> {
/// let claims = app.claims("exports")?;
/// match claims.claim("export-7", "v1", Duration::from_secs(60)).await? {
///     Claim::Taken(token) => {
///         // ... the work, then keep its outcome for a day (its hold, meanwhile, is
///         // extended with `claims.extend` if the work outlasts it):
///         claims.complete("export-7", &token, b"done", Duration::from_secs(86_400)).await?;
///     }
///     Claim::Held { .. } => println!("someone is on it"),
///     Claim::Done { outcome, .. } => println!("done before: {outcome:?}"),
///     _ => {}
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Claims {
    store: ClaimStore,
}

impl std::fmt::Debug for Claims {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Claims")
            .field("base", &self.store.base())
            .finish()
    }
}

impl Claims {
    /// Claims of `store`: the app's ([`QueueApp::claims`](crate::QueueApp::claims)).
    pub(crate) fn new(store: ClaimStore) -> Self {
        Claims { store }
    }

    /// Takes `key` for `hold` if nobody holds it, tagged `tag` (what later callers
    /// compare their request with); else says who holds it, or what it ended with.
    ///
    /// A call that fails (Redis unavailable, or slower than the app's Redis timeout)
    /// leaves no claim behind that outlives it: the script may still run when a stalled
    /// Redis wakes, so the claim is freed in the background, by its token, until its
    /// hold would have ended.
    pub async fn claim(&self, key: &str, tag: &str, hold: Duration) -> Result<Claim, Error> {
        self.store.claim(key, tag, hold).await
    }

    /// Keeps `outcome` for `keep` as the key's, if `token` still holds it (`false`:
    /// the hold expired first, and the outcome was not kept).
    pub async fn complete(
        &self,
        key: &str,
        token: &ClaimToken,
        outcome: &[u8],
        keep: Duration,
    ) -> Result<bool, Error> {
        self.store.complete(key, token, outcome, keep).await
    }

    /// Holds `key` for another `hold` from now, if `token` still holds it (`false`: the
    /// hold expired first). A holder whose work outlasts a short hold extends it while it
    /// works, so that a holder that dies frees the key soon.
    pub async fn extend(
        &self,
        key: &str,
        token: &ClaimToken,
        hold: Duration,
    ) -> Result<bool, Error> {
        self.store.extend(key, token, hold).await
    }

    /// Counts one more under `bucket` (a key of its own in the namespace) in a fixed
    /// window that its first count starts and that lasts `window`: how many so far in
    /// this window, and the window's time left. A rate limit per caller, say.
    pub async fn count(&self, bucket: &str, window: Duration) -> Result<(u64, Duration), Error> {
        self.store.count(bucket, window).await
    }

    /// Frees `key` without an outcome, if `token` still holds it: the next caller takes
    /// it afresh.
    pub async fn release(&self, key: &str, token: &ClaimToken) -> Result<bool, Error> {
        self.store.release(key, token).await
    }
}
