//! Wrong credentials counted per client address: past a few in a window, the client is
//! refused whatever it sends until the window ends. Without it a client guesses
//! thousands of tokens a second.
//!
//! A request whose client is not known (a server that does not record peers) is not
//! counted: one count for every such client would let anyone lock the operators out.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::http::request::Parts;

/// The most clients counted at once: past it, windows that ended are dropped (at most
/// once a second), and a client new while it is still full is not counted. A flood
/// from many addresses costs a bounded table, not a growing one.
const MAX_CLIENTS: usize = 4096;

/// How often a full table is swept of windows that ended.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// The counts of one policy (shared by its clones).
#[derive(Debug)]
pub(super) struct Failures {
    max: u32,
    window: Duration,
    table: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    clients: HashMap<IpAddr, Window>,
    swept: Option<Instant>,
}

#[derive(Debug, Clone, Copy)]
struct Window {
    started: Instant,
    failures: u32,
}

impl Failures {
    pub(super) fn new(max: u32, window: Duration) -> Self {
        Failures {
            max: max.max(1),
            window,
            table: Mutex::default(),
        }
    }

    /// The client's address as the caps count it (`crate::client`); `None` when the
    /// server did not say, and then it is not counted.
    pub(super) fn client(request: &Parts) -> Option<IpAddr> {
        crate::client::of(request)
    }

    /// When `client` may try again, if it is over its failures now.
    pub(super) fn blocked(&self, client: Option<IpAddr>) -> Option<Duration> {
        let client = client?;
        let table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        let window = table.clients.get(&client)?;
        let left = self.window.checked_sub(window.started.elapsed())?;
        (window.failures >= self.max).then_some(left)
    }

    /// One more wrong credential from `client`.
    pub(super) fn record(&self, client: Option<IpAddr>) {
        let Some(client) = client else {
            return;
        };
        let now = Instant::now();
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        let Table { clients, swept } = &mut *table;
        if clients.len() >= MAX_CLIENTS && !clients.contains_key(&client) {
            if swept.is_none_or(|at| now.duration_since(at) >= SWEEP_EVERY) {
                clients.retain(|_, w| now.duration_since(w.started) < self.window);
                *swept = Some(now);
            }
            if clients.len() >= MAX_CLIENTS {
                return;
            }
        }
        let window = clients.entry(client).or_insert(Window {
            started: now,
            failures: 0,
        });
        if now.duration_since(window.started) >= self.window {
            *window = Window {
                started: now,
                failures: 0,
            };
        }
        window.failures = window.failures.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_is_blocked_past_its_failures_until_its_window_ends() {
        let failures = Failures::new(3, Duration::from_millis(200));
        let a = Some(IpAddr::from([10, 0, 0, 1]));
        for _ in 0..5 {
            failures.record(None);
        }
        assert_eq!(
            failures.blocked(None),
            None,
            "a client not known is not counted"
        );
        let b = Some(IpAddr::from([10, 0, 0, 2]));
        for _ in 0..2 {
            failures.record(a);
        }
        assert_eq!(failures.blocked(a), None);
        failures.record(a);
        let left = failures.blocked(a).unwrap();
        assert!(left <= Duration::from_millis(200));
        assert_eq!(failures.blocked(b), None, "another client is not");
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(failures.blocked(a), None, "the window ended");
    }

    #[test]
    fn the_table_of_clients_stays_bounded() {
        let failures = Failures::new(1, Duration::from_secs(60));
        for n in 0..(MAX_CLIENTS as u32 + 100) {
            failures.record(Some(IpAddr::from(n.to_be_bytes())));
        }
        let table = failures.table.lock().unwrap();
        assert_eq!(table.clients.len(), MAX_CLIENTS);
    }
}
