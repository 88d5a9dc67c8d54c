//! Claims of an inline app: the same rules as the engine's Redis scripts, in memory,
//! so that a unit test of a route behind the idempotency layer runs without Redis.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::backend::claims::{Claim, ClaimToken};

/// Past this many keys, a claim first drops every expired one (expired keys are
/// otherwise dropped when their own key is claimed again).
const SWEEP_ABOVE: usize = 1024;

/// One key's record: held while `token` is set, done once `outcome` is.
#[derive(Debug)]
struct Record {
    token: Option<String>,
    tag: String,
    outcome: Option<Vec<u8>>,
    expires: Instant,
    /// For a count's record: how many so far in its window.
    count: u64,
}

/// Every claim of one inline app, all namespaces (the key includes the namespace).
#[derive(Debug, Default)]
pub(crate) struct MemoryClaims {
    records: Mutex<HashMap<String, Record>>,
}

impl MemoryClaims {
    pub(crate) fn claim(&self, key: &str, token: String, tag: &str, hold: Duration) -> Claim {
        let now = Instant::now();
        let mut records = self.records.lock().unwrap_or_else(PoisonError::into_inner);
        if records.len() > SWEEP_ABOVE {
            records.retain(|_, record| record.expires > now);
        }
        match records.get(key).filter(|record| record.expires > now) {
            Some(record) => match &record.outcome {
                Some(outcome) => Claim::Done {
                    tag: record.tag.clone(),
                    outcome: outcome.clone(),
                },
                None => Claim::Held {
                    tag: record.tag.clone(),
                    ends_within: record.expires.saturating_duration_since(now),
                },
            },
            None => {
                let record = Record {
                    token: Some(token.clone()),
                    tag: tag.to_owned(),
                    outcome: None,
                    expires: now + hold,
                    count: 0,
                };
                records.insert(key.to_owned(), record);
                Claim::Taken(ClaimToken(token))
            }
        }
    }

    pub(crate) fn complete(&self, key: &str, token: &str, outcome: &[u8], keep: Duration) -> bool {
        let now = Instant::now();
        let mut records = self.records.lock().unwrap_or_else(PoisonError::into_inner);
        match records.get_mut(key).filter(|record| record.expires > now) {
            Some(record) if record.token.as_deref() == Some(token) => {
                record.token = None;
                record.outcome = Some(outcome.to_vec());
                record.expires = now + keep;
                true
            }
            _ => false,
        }
    }

    pub(crate) fn extend(&self, key: &str, token: &str, hold: Duration) -> bool {
        let now = Instant::now();
        let mut records = self.records.lock().unwrap_or_else(PoisonError::into_inner);
        match records.get_mut(key).filter(|record| record.expires > now) {
            Some(record) if record.token.as_deref() == Some(token) => {
                record.expires = now + hold;
                true
            }
            _ => false,
        }
    }

    /// One more in `key`'s window (a record of its own), started by the first count and
    /// `window` long; the count and the window's time left.
    pub(crate) fn count(&self, key: &str, window: Duration) -> (u64, Duration) {
        let now = Instant::now();
        let mut records = self.records.lock().unwrap_or_else(PoisonError::into_inner);
        let record = records
            .entry(key.to_owned())
            .and_modify(|record| {
                if record.expires <= now {
                    record.count = 0;
                    record.expires = now + window;
                }
            })
            .or_insert_with(|| Record {
                token: None,
                tag: String::new(),
                outcome: None,
                expires: now + window,
                count: 0,
            });
        record.count += 1;
        (record.count, record.expires.saturating_duration_since(now))
    }

    pub(crate) fn release(&self, key: &str, token: &str) -> bool {
        let now = Instant::now();
        let mut records = self.records.lock().unwrap_or_else(PoisonError::into_inner);
        let holds = records
            .get(key)
            .is_some_and(|record| record.expires > now && record.token.as_deref() == Some(token));
        if holds {
            records.remove(key);
        }
        holds
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOLD: Duration = Duration::from_secs(60);

    fn taken(claim: Claim) -> String {
        match claim {
            Claim::Taken(ClaimToken(token)) => token,
            other => panic!("not taken: {other:?}"),
        }
    }

    #[test]
    fn the_first_caller_takes_a_key_and_later_callers_read_its_outcome() {
        let claims = MemoryClaims::default();
        let token = taken(claims.claim("k", "t1".into(), "tag-a", HOLD));
        match claims.claim("k", "t2".into(), "tag-b", HOLD) {
            Claim::Held { tag, ends_within } => {
                assert_eq!(tag, "tag-a");
                assert!(ends_within <= HOLD && ends_within > HOLD / 2);
            }
            other => panic!("not held: {other:?}"),
        }
        assert!(!claims.extend("k", "t2", HOLD), "not the holder");
        assert!(claims.extend("k", &token, HOLD));
        assert!(
            !claims.complete("k", "t2", b"theirs", HOLD),
            "not the holder"
        );
        assert!(claims.complete("k", &token, b"202", HOLD));
        assert_eq!(
            claims.claim("k", "t3".into(), "tag-c", HOLD),
            Claim::Done {
                tag: "tag-a".into(),
                outcome: b"202".to_vec()
            }
        );
    }

    #[test]
    fn counts_run_in_windows() {
        let claims = MemoryClaims::default();
        assert_eq!(claims.count("c", HOLD).0, 1);
        let (n, left) = claims.count("c", HOLD);
        assert!(n == 2 && left <= HOLD && left > HOLD / 2);
        assert_eq!(claims.count("d", Duration::ZERO).0, 1);
        assert_eq!(claims.count("d", Duration::ZERO).0, 1, "a new window");
    }

    #[test]
    fn a_released_or_expired_key_is_taken_afresh() {
        let claims = MemoryClaims::default();
        let token = taken(claims.claim("k", "t1".into(), "a", HOLD));
        assert!(!claims.release("k", "other"));
        assert!(claims.release("k", &token));
        taken(claims.claim("k", "t2".into(), "b", Duration::ZERO));
        // Held for no time at all: expired at once.
        taken(claims.claim("k", "t3".into(), "c", HOLD));
    }
}
