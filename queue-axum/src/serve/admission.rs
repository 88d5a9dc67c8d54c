//! Which connections are served: under the cap on all connections and the cap per
//! client address, a connection gets a slot; over either it is answered at once (503
//! over the cap, 429 over the client's share) and closed, rather than left to wait in
//! the listen backlog, where it would delay everyone behind it and, in a flood,
//! overflow the backlog.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How many refusals are written at once; past it, a refused connection is closed
/// without an answer (each refusal holds a descriptor for up to [`REFUSAL_LINGER`]).
const MAX_REFUSALS_AT_ONCE: usize = 64;

/// How long a refused connection is read (and what it sends discarded) after its
/// answer, so that closing it does not reset the connection before the client has
/// read the answer.
const REFUSAL_LINGER: Duration = Duration::from_millis(500);

/// Why a connection was not served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refused {
    /// Every connection slot is taken: 503.
    Full,
    /// This client address holds its share: 429.
    ClientShare,
}

/// The slots of one server.
#[derive(Debug)]
pub(super) struct Admission {
    slots: Arc<Semaphore>,
    per_client: usize,
    clients: Arc<Mutex<HashMap<IpAddr, usize>>>,
    refusals: Arc<Semaphore>,
}

impl Admission {
    pub(super) fn new(max_connections: usize, per_client: usize) -> Self {
        Admission {
            slots: Arc::new(Semaphore::new(max_connections.min(Semaphore::MAX_PERMITS))),
            per_client: per_client.max(1),
            clients: Arc::default(),
            refusals: Arc::new(Semaphore::new(MAX_REFUSALS_AT_ONCE)),
        }
    }

    /// Whether every slot is taken.
    pub(super) fn full(&self) -> bool {
        self.slots.available_permits() == 0
    }

    /// A slot for a connection from `client`, or why not.
    pub(super) fn admit(&self, client: IpAddr) -> Result<Slot, Refused> {
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        let held = clients.get(&client).copied().unwrap_or(0);
        if held >= self.per_client {
            return Err(Refused::ClientShare);
        }
        let permit = self
            .slots
            .clone()
            .try_acquire_owned()
            .map_err(|_| Refused::Full)?;
        clients.insert(client, held + 1);
        Ok(Slot {
            clients: self.clients.clone(),
            client,
            _permit: permit,
        })
    }

    /// Answers a refused connection and closes it, on a task of its own; or closes it
    /// at once when many refusals are being written already.
    pub(super) fn refuse(&self, stream: TcpStream, why: Refused) {
        let Ok(permit) = self.refusals.clone().try_acquire_owned() else {
            drop(stream);
            return;
        };
        tokio::spawn(async move {
            answer(stream, why).await;
            drop(permit);
        });
    }
}

/// One served connection's slot, given back when the connection ends.
#[derive(Debug)]
pub(super) struct Slot {
    clients: Arc<Mutex<HashMap<IpAddr, usize>>>,
    client: IpAddr,
    _permit: OwnedSemaphorePermit,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(held) = clients.get_mut(&self.client) {
            *held = held.saturating_sub(1);
            if *held == 0 {
                clients.remove(&self.client);
            }
        }
    }
}

/// The whole answer to a refused connection: a status, `Retry-After`, a JSON body.
fn refusal(why: Refused) -> Vec<u8> {
    let (status, message) = match why {
        Refused::Full => (
            "503 Service Unavailable",
            "the server is at its connection limit; retry shortly",
        ),
        Refused::ClientShare => (
            "429 Too Many Requests",
            "this client holds its most connections; close one, or retry shortly",
        ),
    };
    let body = serde_json::json!({ "error": "too many connections", "message": message });
    let body = body.to_string();
    format!(
        "HTTP/1.1 {status}\r\nretry-after: 1\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

async fn answer(mut stream: TcpStream, why: Refused) {
    let written = tokio::time::timeout(REFUSAL_LINGER, async {
        stream.write_all(&refusal(why)).await?;
        stream.shutdown().await
    })
    .await;
    if !matches!(written, Ok(Ok(()))) {
        return;
    }
    // Read what the client still sends (its request), for a moment: a socket closed
    // with unread bytes is reset, and a reset can destroy the answer before it is read.
    let mut sink = [0_u8; 1024];
    let _ = tokio::time::timeout(REFUSAL_LINGER, async {
        while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_holds_its_share_and_the_server_its_cap() {
        let admission = Admission::new(3, 2);
        let a: IpAddr = [10, 0, 0, 1].into();
        let b: IpAddr = [10, 0, 0, 2].into();
        let first = admission.admit(a).unwrap();
        let _second = admission.admit(a).unwrap();
        assert_eq!(admission.admit(a).unwrap_err(), Refused::ClientShare);
        let _third = admission.admit(b).unwrap();
        assert!(admission.full());
        assert_eq!(admission.admit(b).unwrap_err(), Refused::Full);
        drop(first);
        assert!(!admission.full());
        let _again = admission.admit(a).unwrap();
    }

    #[test]
    fn a_refusal_is_a_whole_http_answer() {
        let text = String::from_utf8(refusal(Refused::ClientShare)).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 429 "));
        assert!(head.contains("\r\nretry-after: 1\r\n"), "{head}");
        assert!(head.contains(&format!("content-length: {}", body.len())));
        assert!(serde_json::from_str::<serde_json::Value>(body).is_ok());
    }
}
