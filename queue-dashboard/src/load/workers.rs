//! Who works the app's queues: the processes of the roster (our workers, with
//! `QueueAppBuilder::process_roster` on) and every worker connection Redis's
//! `CLIENT LIST` shows (BullMQ names each after its queue; Node's and Python's too).
//! Redis: two commands and a read per process, then one `CLIENT LIST` per queue.

use queue_core::health::ProcessInfo;
use queue_core::queue::WorkerInfo;
use queue_core::QueueApp;

/// The workers page's data, for some of the app's queues.
pub(crate) struct WorkersPage {
    /// The queues shown: one, or all the app knows.
    pub(crate) queues: Vec<String>,
    /// The processes with a worker on one of them.
    pub(crate) processes: Vec<ProcessInfo>,
    /// Each queue's worker connections.
    pub(crate) connections: Vec<(String, WorkerInfo)>,
}

/// Reads the workers of `queues`.
pub(crate) async fn read(
    app: &QueueApp,
    queues: Vec<String>,
) -> Result<WorkersPage, queue_core::Error> {
    let processes: Vec<_> = app
        .get_processes()
        .await?
        .into_iter()
        .filter(|p| p.workers.iter().any(|w| queues.contains(&w.queue)))
        .collect();
    let mut connections = Vec::new();
    for name in &queues {
        let queue = app.queue::<serde_json::Value>(name)?;
        for worker in queue.get_workers().await? {
            connections.push((name.clone(), worker));
        }
    }
    Ok(WorkersPage {
        queues,
        processes,
        connections,
    })
}
