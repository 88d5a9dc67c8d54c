//! Runs `#[on_worker_event]` and `#[on_queue_event]` functions: each matching event is
//! handed to each listener in a task of its own, so a slow or panicking listener holds
//! up nobody.

use std::collections::BTreeMap;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::engine::{Connection, EngineQueueEvents};
use crate::error::Error;
use crate::events::{QueueEvents, WorkerEvent, WorkerEvents};
use crate::registry::{QueueListenerRecord, WorkerListenerRecord};

/// The running listener tasks of a `Workers` handle.
#[derive(Debug, Default)]
pub(crate) struct Listeners {
    worker: Option<(oneshot::Sender<()>, JoinHandle<()>)>,
    queue: Vec<JoinHandle<()>>,
}

impl Listeners {
    pub(crate) async fn start(
        conn: &Connection,
        worker_records: Vec<&'static WorkerListenerRecord>,
        events: WorkerEvents,
        queue_records: Vec<&'static QueueListenerRecord>,
    ) -> Result<Self, Error> {
        let worker = (!worker_records.is_empty()).then(|| {
            let (stop, stopped) = oneshot::channel();
            (
                stop,
                tokio::spawn(dispatch_worker_events(worker_records, events, stopped)),
            )
        });
        let mut by_queue: BTreeMap<&'static str, Vec<&'static QueueListenerRecord>> =
            BTreeMap::new();
        for record in queue_records {
            by_queue.entry(record.queue).or_default().push(record);
        }
        let mut queue = Vec::new();
        for (name, records) in by_queue {
            let events = QueueEvents::new(EngineQueueEvents::open(conn, name).await?);
            queue.push(tokio::spawn(dispatch_queue_events(records, events)));
        }
        Ok(Listeners { worker, queue })
    }

    /// Delivers the worker events already sent, then stops.
    pub(crate) async fn stop(self) {
        if let Some((stop, task)) = self.worker {
            let _ = stop.send(());
            let _ = task.await;
        }
        for task in self.queue {
            task.abort();
        }
    }
}

async fn dispatch_worker_events(
    records: Vec<&'static WorkerListenerRecord>,
    mut events: WorkerEvents,
    mut stopped: oneshot::Receiver<()>,
) {
    let deliver = |event: WorkerEvent| {
        for record in records
            .iter()
            .filter(|r| r.queue == event.queue() && r.event == event.kind())
        {
            tracing::debug!(
                listener = record.label,
                kind = record.event,
                "worker event listener called"
            );
            tokio::spawn((record.call)(event.clone()));
        }
    };
    loop {
        tokio::select! {
            biased;
            event = events.recv() => match event {
                Some(event) => deliver(event),
                None => return,
            },
            _ = &mut stopped => {
                while let Some(event) = events.try_recv() {
                    deliver(event);
                }
                return;
            }
        }
    }
}

async fn dispatch_queue_events(records: Vec<&'static QueueListenerRecord>, events: QueueEvents) {
    while let Some(event) = events.next().await {
        for record in records.iter().filter(|r| r.event == event.kind()) {
            tracing::debug!(
                listener = record.label,
                kind = record.event,
                "queue event listener called"
            );
            tokio::spawn((record.call)(event.clone()));
        }
    }
}
