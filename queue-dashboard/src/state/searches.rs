//! The bound on searches, per person. Every other page reads a page's worth of jobs; a
//! search reads through thousands (up to 20,000 ids or 5,000 jobs, about 23 ms of Redis
//! on a full scan), and four people searching in a loop saturated Redis. So each person
//! runs one search at a time, and starts at most so many a minute; over either bound the
//! page answers 429 with when to try again. A refused search costs Redis nothing, and,
//! being a read, is not audited.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use queue_axum::access::Access;

use crate::problem::Problem;

/// Searches one person may start a minute by default
/// ([`Dashboard::max_searches_per_minute`](crate::Dashboard::max_searches_per_minute)):
/// a person reading results and paging through a scan stays well under it, and at
/// about 23 ms of Redis a search it costs Redis about 1% per person searching flat out.
pub const DEFAULT_MAX_SEARCHES_PER_MINUTE: u32 = 30;

/// The most people whose searches are kept track of at once. Someone is forgotten once
/// their allowance is whole again and nothing of theirs runs, which is as a newcomer
/// stands; this bounds the memory when a policy names people freely (any user name
/// with the shared password, say).
const MAX_SEARCHERS: usize = 10_000;

/// Whose searches count together.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Searcher {
    /// The person the application's policy named ([`Access::who`]), as the audit names
    /// them.
    Named(String),
    /// Nobody named: the connection's peer, when the server records it
    /// (`into_make_service_with_connect_info`).
    Peer(IpAddr),
    /// Nobody named and no peer known: all such requests share one allowance.
    Anonymous,
}

impl Searcher {
    /// Whose search a request with `access` from `peer` is.
    pub(crate) fn of(access: &Access, peer: Option<IpAddr>) -> Searcher {
        let who = access.who().trim();
        match peer {
            _ if !who.is_empty() => Searcher::Named(who.to_owned()),
            Some(ip) => Searcher::Peer(ip),
            None => Searcher::Anonymous,
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Searcher {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let peer = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(peer)| peer.ip());
        // The guard puts its decision in every request it lets through; a request
        // without one (none reaches a page) counts as nobody's.
        let nobody = Access::forbidden();
        let access = parts.extensions.get::<Access>().unwrap_or(&nobody);
        Ok(Searcher::of(access, peer))
    }
}

/// Each person's allowance of searches, and whether one of theirs runs.
pub(crate) struct Searches {
    per_minute: u32,
    max_searchers: usize,
    searchers: Mutex<HashMap<Searcher, Allowance>>,
}

/// A token bucket: `per_minute` searches at once, refilled at `per_minute` a minute.
#[derive(Debug)]
struct Allowance {
    /// Searches that may start now (a fraction is one on its way).
    tokens: f64,
    /// When `tokens` was last brought up to date.
    at: Instant,
    /// Whether a search of this person's runs now.
    running: bool,
}

impl Allowance {
    /// Brings `tokens` up to `now`, refilled at `per_minute` a minute up to that many.
    fn refill(&mut self, now: Instant, per_minute: u32) {
        let per_minute = f64::from(per_minute);
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * per_minute / 60.0).min(per_minute);
        self.at = now;
    }

    /// Whether it stands as a newcomer's would: whole, and nothing running.
    fn idle(&mut self, now: Instant, per_minute: u32) -> bool {
        self.refill(now, per_minute);
        !self.running && self.tokens >= f64::from(per_minute)
    }
}

impl Default for Searches {
    fn default() -> Self {
        Searches::new(DEFAULT_MAX_SEARCHES_PER_MINUTE)
    }
}

impl Searches {
    /// At most `per_minute` searches a minute per person (at least one).
    pub(crate) fn new(per_minute: u32) -> Self {
        Searches {
            per_minute: per_minute.max(1),
            max_searchers: MAX_SEARCHERS,
            searchers: Mutex::default(),
        }
    }

    /// Starts a search of `searcher`'s, or says why not and when to try again.
    pub(crate) fn start(&self, searcher: Searcher) -> Result<Search<'_>, Problem> {
        self.start_at(searcher, Instant::now())
    }

    fn start_at(&self, searcher: Searcher, now: Instant) -> Result<Search<'_>, Problem> {
        let per_minute = self.per_minute;
        // Seconds between two searches at the steady rate.
        let interval = 60.0 / f64::from(per_minute);
        let mut searchers = self
            .searchers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if !searchers.contains_key(&searcher) && searchers.len() >= self.max_searchers {
            searchers.retain(|_, allowance| !allowance.idle(now, per_minute));
            if searchers.len() >= self.max_searchers {
                return Err(Problem::TooMany {
                    message: "Too many people are searching this dashboard right now. Try \
                              again in a moment."
                        .to_owned(),
                    retry_after_s: whole_seconds(interval),
                });
            }
        }
        let allowance = searchers
            .entry(searcher.clone())
            .or_insert_with(|| Allowance {
                tokens: f64::from(per_minute),
                at: now,
                running: false,
            });
        allowance.refill(now, per_minute);
        if allowance.running {
            return Err(Problem::TooMany {
                message: "Your previous search is still running: this dashboard runs one \
                          search at a time for each person, as a search reads through \
                          thousands of jobs. Try again in a moment."
                    .to_owned(),
                retry_after_s: 1,
            });
        }
        if allowance.tokens < 1.0 {
            let retry_after_s = whole_seconds((1.0 - allowance.tokens) * interval);
            let searches = if per_minute == 1 {
                "search"
            } else {
                "searches"
            };
            return Err(Problem::TooMany {
                message: format!(
                    "Too many searches: this dashboard runs at most {per_minute} {searches} a \
                     minute for each person, as a search reads through thousands of jobs. \
                     Try again in {retry_after_s} s."
                ),
                retry_after_s,
            });
        }
        allowance.tokens -= 1.0;
        allowance.running = true;
        Ok(Search {
            searches: self,
            searcher,
        })
    }
}

/// `seconds` rounded up, at least one: what `Retry-After` says.
fn whole_seconds(seconds: f64) -> u64 {
    // At most a minute (the refill of one search at one a minute), so the cast is exact.
    seconds.ceil().clamp(1.0, 60.0) as u64
}

/// A running search: its person's place, given back when it is dropped, however the
/// request ends (answered, failed, or abandoned by a client that left).
pub(crate) struct Search<'a> {
    searches: &'a Searches,
    searcher: Searcher,
}

impl Drop for Search<'_> {
    fn drop(&mut self) {
        let mut searchers = self
            .searches
            .searchers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // A running search's allowance is never forgotten, so it is there.
        if let Some(allowance) = searchers.get_mut(&self.searcher) {
            allowance.running = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn olga() -> Searcher {
        Searcher::Named("olga".to_owned())
    }

    fn retry_after(refused: Result<Search<'_>, Problem>) -> u64 {
        match refused {
            Err(Problem::TooMany { retry_after_s, .. }) => retry_after_s,
            Err(other) => panic!("{other:?}"),
            Ok(_) => panic!("admitted"),
        }
    }

    #[test]
    fn a_person_starts_the_allowance_at_once_then_one_per_interval() {
        let searches = Searches::new(3);
        let start = Instant::now();
        for _ in 0..3 {
            drop(searches.start_at(olga(), start).unwrap());
        }
        // Three a minute: the next one 20 s after the allowance was spent.
        assert_eq!(retry_after(searches.start_at(olga(), start)), 20);
        let later = start + Duration::from_secs(15);
        assert_eq!(retry_after(searches.start_at(olga(), later)), 5);
        let then = start + Duration::from_secs(20);
        drop(searches.start_at(olga(), then).unwrap());
        assert_eq!(retry_after(searches.start_at(olga(), then)), 20);
        // Someone else has an allowance of their own.
        let oscar = Searcher::Named("oscar".to_owned());
        drop(searches.start_at(oscar, then).unwrap());
        // Never more than the allowance, however long the pause.
        let next_day = start + Duration::from_secs(86_400);
        for _ in 0..3 {
            drop(searches.start_at(olga(), next_day).unwrap());
        }
        assert!(searches.start_at(olga(), next_day).is_err());
    }

    #[test]
    fn one_search_at_a_time_each_given_back_when_it_ends() {
        let searches = Searches::new(100);
        let now = Instant::now();
        let running = searches.start_at(olga(), now).unwrap();
        assert_eq!(retry_after(searches.start_at(olga(), now)), 1);
        let peer = Searcher::Peer(IpAddr::from([127, 0, 0, 1]));
        let beside = searches.start_at(peer, now).unwrap();
        drop(running);
        drop(searches.start_at(olga(), now).unwrap());
        drop(beside);
    }

    #[test]
    fn nobody_named_is_the_peer_or_else_everyone_unnamed() {
        let ip = IpAddr::from([10, 0, 0, 7]);
        assert_eq!(Searcher::of(&Access::operator("olga"), Some(ip)), olga());
        assert_eq!(
            Searcher::of(&Access::read_only(" "), Some(ip)),
            Searcher::Peer(ip)
        );
        assert_eq!(
            Searcher::of(&Access::read_only(""), None),
            Searcher::Anonymous
        );
    }

    #[test]
    fn people_are_forgotten_once_idle_and_the_table_stays_bounded() {
        let mut searches = Searches::new(2);
        searches.max_searchers = 2;
        let start = Instant::now();
        let name = |n: u32| Searcher::Named(format!("p{n}"));
        let first = searches.start_at(name(0), start).unwrap();
        drop(searches.start_at(name(1), start).unwrap());
        // Both tracked and neither idle: a third person waits.
        assert!(searches.start_at(name(2), start).is_err());
        // A minute on, p1 is whole again and forgotten; p0 still runs and is kept.
        let later = start + Duration::from_secs(60);
        drop(searches.start_at(name(2), later).unwrap());
        assert!(searches.start_at(name(0), later).is_err(), "still running");
        drop(first);
        drop(searches.start_at(name(0), later).unwrap());
    }
}
