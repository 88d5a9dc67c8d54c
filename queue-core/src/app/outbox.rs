//! The app's outbox and its relays (feature `sqlx`): the relay adds through the app's
//! queues, held weakly.

use std::sync::{Arc, PoisonError, Weak};

use super::{AppInner, QueueApp};
use crate::error::Error;
use crate::queue::Queue;
use crate::relay::{Relay, RelayStats, RelayTarget};
use crate::store::Outbox;

impl RelayTarget for AppInner {
    fn queue(&self, name: &str) -> Result<Queue<serde_json::Value>, Error> {
        AppInner::queue(self, name)
    }

    fn memory_high(&self) -> bool {
        self.memory
            .as_ref()
            .is_some_and(|memory| memory.state().over)
    }
}

/// A relay of `outbox` into `app`'s queues; it stops when the app is dropped.
pub(super) fn relay_into(app: &QueueApp, outbox: Outbox) -> Relay {
    let target: Weak<dyn RelayTarget> = Arc::downgrade(&app.inner) as Weak<AppInner>;
    Relay::start(target, outbox)
}

#[cfg(feature = "sqlx")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlx")))]
impl QueueApp {
    /// The app's outbox, if it has one ([`QueueAppBuilder::outbox`](crate::QueueAppBuilder::outbox)).
    pub fn outbox(&self) -> Option<&Outbox> {
        self.inner.producer.outbox.as_ref()
    }

    /// Starts another relay of the app's outbox (`build` already started one unless
    /// told not to). Fails when the app has no outbox.
    pub fn start_relay(&self) -> Result<Relay, Error> {
        let outbox = self.outbox().ok_or_else(|| {
            Error::invalid(
                "outbox",
                "this app has no outbox; give it one with QueueAppBuilder::outbox",
            )
        })?;
        Ok(relay_into(self, outbox.clone()))
    }

    /// What the relay `build` started has done, if there is one.
    pub fn relay_stats(&self) -> Option<RelayStats> {
        self.inner
            .relay
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(Relay::stats)
    }

    /// Stops the relay `build` started, after its batch in flight. Rows still in the
    /// outbox stay there for the next relay.
    pub async fn stop_relay(&self) {
        let relay = self
            .inner
            .relay
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(relay) = relay {
            relay.shutdown().await;
        }
    }

    pub(crate) fn keep_relay(&self, relay: Relay) {
        *self
            .inner
            .relay
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(relay);
    }
}
