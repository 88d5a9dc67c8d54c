//! What a claim call answers, whichever store keeps the claims.

/// What [`Claims::claim`](crate::claims::Claims::claim) found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Claim {
    /// Nobody held the key: it is this caller's now, until the hold expires. Finish with
    /// [`Claims::complete`](crate::claims::Claims::complete) or
    /// [`Claims::release`](crate::claims::Claims::release).
    Taken(ClaimToken),
    /// Another caller holds the key and has not finished; the tag it claimed with.
    Held {
        /// The holder's tag.
        tag: String,
        /// When the hold ends at the latest, unless its holder extends it
        /// ([`Claims::extend`](crate::claims::Claims::extend)) or finishes first.
        ends_within: std::time::Duration,
    },
    /// The key's work is done: the tag it was claimed with, and the outcome kept.
    Done {
        /// The first caller's tag.
        tag: String,
        /// What [`Claims::complete`](crate::claims::Claims::complete) stored.
        outcome: Vec<u8>,
    },
}

/// Proof of holding a claimed key: only its holder completes or releases it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimToken(pub(crate) String);
