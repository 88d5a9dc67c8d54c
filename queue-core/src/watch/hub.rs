//! The hub: one reader of a queue's Redis event stream per process, started by the
//! first watcher of one of its jobs and stopped once nobody watches, handing each event
//! to the watchers of its job only (a map lookup, not a broadcast to every watcher).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use crate::backend::{Backend, Connection, EngineQueueEvents};
use crate::encryption::Sealer;
use crate::error::Error;
use crate::events::{EventFeed, QueueEvent};

/// Events a watcher may have unread before it is dropped from its feed (it then reads
/// the job's state again and watches anew, which loses nothing: see [`JobWatcher::next`]).
const WATCHER_BUFFER: usize = 16;

/// How often a reader looks whether anyone still watches its queue. Also how long an
/// unwatched reader lives on: a burst of short waits reuses one reader.
const IDLE_CHECK: Duration = Duration::from_secs(2);

/// Whether a feed's reader knows where the stream ends (from there on, every event
/// reaches the watchers registered when it arrives).
#[derive(Debug, Clone)]
enum Readiness {
    Opening,
    Ready,
    Failed(String),
}

/// The app's watchers of jobs, by queue: one [`Feed`] (and one reader) per queue.
#[derive(Debug)]
pub(crate) struct JobWatch {
    backend: Backend,
    feeds: Mutex<HashMap<String, Arc<Feed>>>,
    next_key: AtomicU64,
}

/// A watcher's key and mailbox.
type Mailbox = (u64, mpsc::Sender<Arc<QueueEvent>>);

/// The watchers of a queue's jobs, by job id.
type ByJob = HashMap<String, Vec<Mailbox>>;

/// One queue's reader and the watchers of its jobs.
#[derive(Debug)]
struct Feed {
    queue: String,
    ready: watch::Receiver<Readiness>,
    /// By job id: each watcher's key and mailbox.
    watchers: Mutex<ByJob>,
}

/// How many readers and watchers an app has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct WatchStats {
    /// Queues with a reader of their event stream (one Redis connection each).
    pub readers: usize,
    /// Watchers registered: waits, live streams, [`JobWatcher`]s.
    pub watchers: usize,
}

impl JobWatch {
    pub(crate) fn new(backend: Backend) -> Self {
        JobWatch {
            backend,
            feeds: Mutex::default(),
            next_key: AtomicU64::new(0),
        }
    }

    pub(crate) fn stats(&self) -> WatchStats {
        let feeds = self.feeds.lock().unwrap_or_else(PoisonError::into_inner);
        let watchers = feeds.values().map(|feed| feed.count()).sum();
        WatchStats {
            readers: feeds.len(),
            watchers,
        }
    }

    /// A watcher of job `id` of `queue`, once the queue's reader is ready: every event
    /// written from now on reaches it. Reads the job's state only after this returns,
    /// so that a change between the two is either in the state read or in an event.
    pub(crate) async fn watch(
        self: &Arc<Self>,
        queue: &str,
        id: &str,
    ) -> Result<JobWatcher, Error> {
        let conn = self.backend.redis("watch_job")?;
        let (tx, rx) = mpsc::channel(WATCHER_BUFFER);
        let key = self.next_key.fetch_add(1, Ordering::Relaxed);
        let feed = {
            // Registered under the hub's lock, which a reader also takes to decide it
            // is unwatched: a reader never stops with a watcher on it.
            let mut feeds = self.feeds.lock().unwrap_or_else(PoisonError::into_inner);
            let feed = match feeds.get(queue) {
                Some(feed) => feed.clone(),
                None => {
                    let feed = self.start(conn, queue);
                    feeds.insert(queue.to_owned(), feed.clone());
                    feed
                }
            };
            feed.add(id, key, tx);
            feed
        };
        let watcher = JobWatcher {
            feed: feed.clone(),
            id: id.to_owned(),
            key,
            events: rx,
            sealer: None,
        };
        let mut ready = feed.ready.clone();
        loop {
            match &*ready.borrow_and_update() {
                Readiness::Ready => return Ok(watcher),
                Readiness::Failed(reason) => return Err(Error::Redis(reason.clone().into())),
                Readiness::Opening => {}
            }
            if ready.changed().await.is_err() {
                return Err(Error::Redis("the queue's event reader stopped".into()));
            }
        }
    }

    /// A feed for `queue`, with its reader started.
    fn start(self: &Arc<Self>, conn: &Connection, queue: &str) -> Arc<Feed> {
        let (ready_tx, ready) = watch::channel(Readiness::Opening);
        let feed = Arc::new(Feed {
            queue: queue.to_owned(),
            ready,
            watchers: Mutex::default(),
        });
        tokio::spawn(read(self.clone(), conn.clone(), feed.clone(), ready_tx));
        feed
    }

    /// Drops `feed` from the hub if nobody watches it; decided under the hub's lock.
    fn release_if_unwatched(&self, feed: &Arc<Feed>) -> bool {
        let mut feeds = self.feeds.lock().unwrap_or_else(PoisonError::into_inner);
        if feed.count() > 0 {
            return false;
        }
        remove_if_current(&mut feeds, feed);
        true
    }

    /// Drops `feed` from the hub: its reader has ended.
    fn forget(&self, feed: &Arc<Feed>) {
        let mut feeds = self.feeds.lock().unwrap_or_else(PoisonError::into_inner);
        remove_if_current(&mut feeds, feed);
    }
}

fn remove_if_current(feeds: &mut HashMap<String, Arc<Feed>>, feed: &Arc<Feed>) {
    if feeds.get(&feed.queue).is_some_and(|f| Arc::ptr_eq(f, feed)) {
        feeds.remove(&feed.queue);
    }
}

impl Feed {
    fn lock(&self) -> std::sync::MutexGuard<'_, ByJob> {
        self.watchers.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn count(&self) -> usize {
        self.lock().values().map(Vec::len).sum()
    }

    fn add(&self, id: &str, key: u64, tx: mpsc::Sender<Arc<QueueEvent>>) {
        self.lock()
            .entry(id.to_owned())
            .or_default()
            .push((key, tx));
    }

    fn remove(&self, id: &str, key: u64) {
        let mut watchers = self.lock();
        if let Some(of_job) = watchers.get_mut(id) {
            of_job.retain(|(k, _)| *k != key);
            if of_job.is_empty() {
                watchers.remove(id);
            }
        }
    }

    /// Hands `event` to its job's watchers. One that is behind is dropped: its mailbox
    /// closes, and it reads the job's state again.
    fn dispatch(&self, event: QueueEvent) {
        let Some(id) = event.job_id() else { return };
        let mut watchers = self.lock();
        let Some(of_job) = watchers.get_mut(id) else {
            return;
        };
        let id = id.to_owned();
        let event = Arc::new(event);
        of_job.retain(|(_, tx)| tx.try_send(event.clone()).is_ok());
        if of_job.is_empty() {
            watchers.remove(&id);
        }
    }

    /// Closes every watcher's mailbox: the reader has ended.
    fn close_all(&self) {
        self.lock().clear();
    }
}

/// Reads `feed`'s queue until nobody watches it.
async fn read(
    hub: Arc<JobWatch>,
    conn: Connection,
    feed: Arc<Feed>,
    ready: watch::Sender<Readiness>,
) {
    let events = match EngineQueueEvents::open(&conn, &feed.queue).await {
        Ok(events) => events,
        Err(e) => {
            tracing::debug!(queue = %feed.queue, error = %e, "cannot read the queue's events; its watchers are told");
            // Forgotten first: a watcher that retries gets a new reader, not this one.
            hub.forget(&feed);
            let _ = ready.send(Readiness::Failed(e.to_string()));
            feed.close_all();
            return;
        }
    };
    let _ = ready.send(Readiness::Ready);
    tracing::debug!(queue = %feed.queue, "job watch: reading the queue's events");
    let mut idle = tokio::time::interval(IDLE_CHECK);
    idle.tick().await;
    loop {
        tokio::select! {
            event = events.next() => match event {
                Some(event) => feed.dispatch(event),
                None => break,
            },
            _ = idle.tick() => {
                if hub.release_if_unwatched(&feed) {
                    break;
                }
            }
        }
    }
    hub.forget(&feed);
    feed.close_all();
    tracing::debug!(queue = %feed.queue, "job watch: reader stopped");
    Box::new(events).close().await;
}

/// A subscription to one job's events, from the queue's shared reader. Dropped, it
/// leaves the reader (which stops once nobody watches its queue).
///
/// ```no_run
/// # async fn demo(email: queue_core::Queue<()>) -> queue_core::Result<()> {
/// let mut watcher = email.watch_job("welcome-42").await?;
/// // Read the state after subscribing: a change in between is in one or the other.
/// let now = email.get_job_state("welcome-42").await?;
/// println!("now {now:?}");
/// while let Some(event) = watcher.next().await {
///     println!("{}", event.kind());
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct JobWatcher {
    feed: Arc<Feed>,
    id: String,
    key: u64,
    events: mpsc::Receiver<Arc<QueueEvent>>,
    /// Opens a sealed return value for the watcher's reader.
    sealer: Option<Sealer>,
}

impl JobWatcher {
    /// The next event about the job. `None` when the watch has ended: this watcher
    /// fell behind by more than a few events, or the queue's reader stopped. Read the
    /// job's state again then (and watch anew if it still matters): nothing is lost.
    pub async fn next(&mut self) -> Option<QueueEvent> {
        let event = self.events.recv().await.map(Arc::unwrap_or_clone)?;
        let Some(sealer) = &self.sealer else {
            return Some(event);
        };
        let (event, unopened) = event.opened(sealer);
        if let (Some(e), QueueEvent::Completed { job_id, .. }) = (unopened, &event) {
            tracing::warn!(job_id = %job_id, error = %e, "a completed job's return value does not open");
        }
        Some(event)
    }

    /// This watcher, with the return values it reads opened when sealed.
    pub(crate) fn opening_with(mut self, sealer: &Sealer) -> Self {
        self.sealer = Some(sealer.clone());
        self
    }

    /// The watched job's id.
    pub fn job_id(&self) -> &str {
        &self.id
    }
}

impl Drop for JobWatcher {
    fn drop(&mut self) {
        self.feed.remove(&self.id, self.key);
    }
}
