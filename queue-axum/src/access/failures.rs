//! Wrong credentials counted per client address: past a few in a window, the client is
//! refused whatever it sends until the window ends. Without it a client guesses
//! thousands of tokens a second.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::ConnectInfo;
use axum::http::request::Parts;

/// Past this many clients counted, windows that ended are dropped first.
const PRUNE_ABOVE: usize = 4096;

/// The counts of one policy (shared by its clones).
#[derive(Debug)]
pub(super) struct Failures {
    max: u32,
    window: Duration,
    clients: Mutex<HashMap<Option<IpAddr>, Window>>,
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
            clients: Mutex::default(),
        }
    }

    /// The client's address (known under `queue_axum::serve`, or axum's
    /// `ConnectInfo`); `None`, one count for every client not known.
    pub(super) fn client(request: &Parts) -> Option<IpAddr> {
        request
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(peer)| peer.ip())
    }

    /// When `client` may try again, if it is over its failures now.
    pub(super) fn blocked(&self, client: Option<IpAddr>) -> Option<Duration> {
        let clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        let window = clients.get(&client)?;
        let left = self.window.checked_sub(window.started.elapsed())?;
        (window.failures >= self.max).then_some(left)
    }

    /// One more wrong credential from `client`.
    pub(super) fn record(&self, client: Option<IpAddr>) {
        let now = Instant::now();
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        if clients.len() > PRUNE_ABOVE {
            clients.retain(|_, w| now.duration_since(w.started) < self.window);
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
}
