//! A key a request holds while its route runs: a short lease, extended while the route
//! runs, so that a process that dies frees the key within a lease, and a Redis that
//! stalls for less than two thirds of one does not let a retry in beside the route.

use std::future::Future;
use std::time::Duration;

use queue_core::claims::{ClaimToken, Claims};
use tokio::time::Instant;

/// How long a request holds its key at a time.
pub(super) const LEASE: Duration = Duration::from_secs(15);

/// How soon a failed extension is tried again.
const RETRY_SOON: Duration = Duration::from_secs(1);

/// A key this request holds.
pub(super) struct Held<'a> {
    pub(super) claims: &'a Claims,
    pub(super) key: &'a str,
    pub(super) token: &'a ClaimToken,
}

impl Held<'_> {
    /// Runs `work`, extending the hold by `lease` every third of one while it runs,
    /// until `hold` in all. The extensions run beside `work`, never in its way: a slow
    /// Redis does not slow the route.
    pub(super) async fn while_running<F: Future>(
        &self,
        work: F,
        lease: Duration,
        hold: Duration,
    ) -> F::Output {
        let mut work = std::pin::pin!(work);
        tokio::select! {
            out = &mut work => return out,
            // The hold is spent (or lost): nothing is left to do but the work.
            () = self.extend_until(lease, hold) => {}
        }
        work.await
    }

    /// Extends the hold every third of a lease until `hold` has passed since it began
    /// (or the hold was lost); then returns.
    async fn extend_until(&self, lease: Duration, hold: Duration) {
        let started = Instant::now();
        let mut wait = lease / 3;
        loop {
            tokio::time::sleep(wait).await;
            let next = lease.min(hold.saturating_sub(started.elapsed()));
            if next.is_zero() {
                return;
            }
            wait = match self.claims.extend(self.key, self.token, next).await {
                Ok(true) => lease / 3,
                Ok(false) => {
                    tracing::warn!(
                        ?hold,
                        "a request under an Idempotency-Key lost its hold; its answer will not be kept"
                    );
                    return;
                }
                // Soon again: the lease runs on meanwhile.
                Err(error) => {
                    tracing::debug!(%error, "an Idempotency-Key's hold could not be extended");
                    RETRY_SOON.min(lease / 3)
                }
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use queue_core::claims::Claim;
    use queue_core::{app::Registrations, QueueApp};

    use super::*;

    #[tokio::test]
    async fn a_running_request_keeps_its_key_past_its_lease_until_its_hold() {
        let app = QueueApp::builder()
            .registrations(Registrations::None)
            .build_inline()
            .expect("an inline app");
        let claims = app.claims("held").expect("claims");
        // Wide margins: a tick delayed by a busy machine still lands within the lease.
        let lease = Duration::from_millis(600);
        let claim = |key: &'static str| {
            let claims = claims.clone();
            async move { claims.claim(key, "tag", lease).await.expect("claim") }
        };
        let Claim::Taken(token) = claim("long").await else {
            panic!("the key is free")
        };
        let held = Held {
            claims: &claims,
            key: "long",
            token: &token,
        };
        held.while_running(
            tokio::time::sleep(lease * 3),
            lease,
            Duration::from_secs(60),
        )
        .await;
        assert!(
            matches!(claim("long").await, Claim::Held { .. }),
            "extended while it ran, three leases long"
        );

        // Past its hold, a request is no longer extended: the key frees itself.
        let Claim::Taken(token) = claim("capped").await else {
            panic!("the key is free")
        };
        let held = Held {
            claims: &claims,
            key: "capped",
            token: &token,
        };
        held.while_running(tokio::time::sleep(lease * 3), lease, lease)
            .await;
        assert!(matches!(claim("capped").await, Claim::Taken(_)));
    }
}
