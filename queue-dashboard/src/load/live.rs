//! Live pages' feed: a queue's event stream, read once per queue however many tabs
//! watch it. An update carries the changes: the counts, and the new state of each job
//! that moved (read once per burst by the queue's reader, and encoded once, as the JSON
//! the tabs' script reads, for every tab). The routes send it to each tab as
//! server-sent events; a tab's script puts it in place and never fetches the page
//! again, so a page that cost a search costs it once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use queue_core::{job::JobCounts, JobState, QueueApp};
use tokio::sync::broadcast;

/// Updates a tab may miss before it is told to catch up (it then refetches anyway).
const TAB_BUFFER: usize = 64;

/// How long a reader gathers events before it reads the counts once and sends: a
/// burst of a thousand completions is one update, not a thousand count reads.
const COALESCE: Duration = Duration::from_millis(200);

/// The most moved jobs whose states one update carries; more only say that more moved.
const MOVED_MAX: usize = 100;

/// How often a reader with no event looks whether anyone still watches.
const IDLE_CHECK: Duration = Duration::from_secs(2);

/// Live streams open at once by default, across the dashboard's tabs.
pub const DEFAULT_MAX_LIVE_STREAMS: usize = 256;

/// How long a live stream lasts by default before it ends (the tab's `EventSource`
/// opens another at once): no stream is held for ever by a tab nobody looks at, and a
/// proxy's idle limit never cuts one mid-update.
pub const DEFAULT_LIVE_STREAM_LIFETIME: Duration = Duration::from_secs(600);

/// One reader per watched queue, shared by every tab; and the tabs' streams, capped.
pub(crate) struct LiveHub {
    feeds: Mutex<HashMap<String, broadcast::Sender<Arc<str>>>>,
    /// One permit per open stream.
    pub(crate) streams: Arc<tokio::sync::Semaphore>,
    pub(crate) lifetime: Duration,
}

impl Default for LiveHub {
    fn default() -> Self {
        LiveHub {
            feeds: Mutex::default(),
            streams: Arc::new(tokio::sync::Semaphore::new(DEFAULT_MAX_LIVE_STREAMS)),
            lifetime: DEFAULT_LIVE_STREAM_LIFETIME,
        }
    }
}

impl LiveHub {
    /// A subscription to `queue`'s updates, starting its reader if nobody watched it.
    pub(crate) fn subscribe(
        self: &Arc<Self>,
        app: &QueueApp,
        queue: &str,
    ) -> broadcast::Receiver<Arc<str>> {
        let mut feeds = self.feeds.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(feed) = feeds.get(queue) {
            return feed.subscribe();
        }
        let (feed, tab) = broadcast::channel(TAB_BUFFER);
        feeds.insert(queue.to_owned(), feed.clone());
        tokio::spawn(read(self.clone(), app.clone(), queue.to_owned(), feed));
        tab
    }

    /// Ends `queue`'s reader if no tab watches it any more; decided under the lock, so
    /// a tab that subscribes meanwhile gets a reader of its own.
    fn release_if_unwatched(&self, queue: &str, feed: &broadcast::Sender<Arc<str>>) -> bool {
        let mut feeds = self.feeds.lock().unwrap_or_else(PoisonError::into_inner);
        if feed.receiver_count() > 0 {
            return false;
        }
        remove_if_current(&mut feeds, queue, feed);
        true
    }

    /// Drops `feed` from the hub if it is still `queue`'s: its reader has ended.
    fn forget(&self, queue: &str, feed: &broadcast::Sender<Arc<str>>) {
        let mut feeds = self.feeds.lock().unwrap_or_else(PoisonError::into_inner);
        remove_if_current(&mut feeds, queue, feed);
    }
}

/// Removes `queue`'s entry if it is `feed` (a newer reader may have replaced it).
fn remove_if_current(
    feeds: &mut HashMap<String, broadcast::Sender<Arc<str>>>,
    queue: &str,
    feed: &broadcast::Sender<Arc<str>>,
) {
    if feeds.get(queue).is_some_and(|f| f.same_channel(feed)) {
        feeds.remove(queue);
    }
}

/// Reads `queue`'s events until nobody watches, sending an update per burst.
async fn read(hub: Arc<LiveHub>, app: QueueApp, queue: String, feed: broadcast::Sender<Arc<str>>) {
    let (events, handle) = match (
        app.queue_events(&queue).await,
        app.queue::<serde_json::Value>(&queue),
    ) {
        (Ok(events), Ok(handle)) => (events, handle),
        _ => {
            // Redis is away: say so, and end; the tabs' EventSource reconnects, and the
            // next subscription tries again.
            let _ = feed.send(Arc::from(r#"{"unavailable":true}"#));
            hub.forget(&queue, &feed);
            return;
        }
    };
    loop {
        let first = tokio::select! {
            event = events.next() => event,
            _ = tokio::time::sleep(IDLE_CHECK) => {
                if hub.release_if_unwatched(&queue, &feed) { break }
                continue;
            }
        };
        let Some(first) = first else { break };
        let mut moved: Vec<String> = first.job_id().map(str::to_owned).into_iter().collect();
        let gather = tokio::time::sleep(COALESCE);
        tokio::pin!(gather);
        loop {
            tokio::select! {
                event = events.next() => match event {
                    Some(event) => moved.extend(event.job_id().map(str::to_owned)),
                    None => break,
                },
                _ = &mut gather => break,
            }
        }
        moved.sort();
        moved.dedup();
        let more = moved.len() > MOVED_MAX;
        moved.truncate(MOVED_MAX);
        let update = match tokio::try_join!(
            handle.get_job_counts(),
            handle.is_paused(),
            handle.get_job_states(&moved)
        ) {
            Ok((counts, paused, states)) => update_json(&counts, paused, &moved, &states, more),
            Err(_) => r#"{"unavailable":true}"#.to_owned(),
        };
        if feed.send(Arc::from(update)).is_err() && hub.release_if_unwatched(&queue, &feed) {
            break;
        }
    }
    // Whatever ended the reading (nobody watches, or the event stream closed), the next
    // tab must start a reader of its own rather than wait on this feed.
    hub.forget(&queue, &feed);
    events.close().await;
}

/// An update, as the tabs' script reads it: the counts per state, the pause flag, each moved job's state (`null`
/// when it is gone), and whether more jobs moved than are listed.
fn update_json(
    counts: &JobCounts,
    paused: bool,
    moved: &[String],
    states: &[Option<JobState>],
    more: bool,
) -> String {
    let by_state: serde_json::Map<String, serde_json::Value> = JobState::ALL
        .iter()
        .map(|state| (state.as_str().to_owned(), counts.of(*state).into()))
        .collect();
    let jobs: serde_json::Map<String, serde_json::Value> = moved
        .iter()
        .zip(states)
        .map(|(id, state)| (id.clone(), state.map(|s| s.as_str()).into()))
        .collect();
    serde_json::json!({
        "counts": by_state,
        "paused": paused,
        "jobs": jobs,
        "more": more,
    })
    .to_string()
}
