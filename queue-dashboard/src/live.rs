//! Live pages: a queue's event stream, read once per queue however many tabs watch it,
//! sent to each tab as server-sent events. An update carries the changes: the counts,
//! and the new state of each job that moved (read once per burst by the queue's reader,
//! for every tab). A tab's script puts them in place; it never fetches the page again,
//! so a page that cost a search costs it once.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::stream::{self, Stream, StreamExt};
use queue_core::{job::JobCounts, JobState, QueueApp};
use tokio::sync::broadcast;

use super::{PageResult, Shared};

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
    pub(super) streams: Arc<tokio::sync::Semaphore>,
    pub(super) lifetime: Duration,
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
    fn subscribe(self: &Arc<Self>, app: &QueueApp, queue: &str) -> broadcast::Receiver<Arc<str>> {
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

/// An update: the counts per state, the pause flag, each moved job's state (`null`
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

/// `GET /queues/{queue}/live`: the queue's updates, as `update` events, for at most
/// the hub's lifetime; 503 when the hub's streams are all taken (the page works on,
/// without live counts).
pub(super) async fn stream(
    State(shared): State<Arc<Shared>>,
    Path(name): Path<String>,
) -> PageResult {
    shared.queue(&name)?;
    let Ok(slot) = shared.live.streams.clone().try_acquire_owned() else {
        tracing::debug!(queue = %name, "every live stream is taken; answering 503");
        return Ok((
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            [(axum::http::header::RETRY_AFTER, "30")],
            "too many live streams; the page works without live updates",
        )
            .into_response());
    };
    let tab = shared.live.subscribe(&shared.app, &name);
    let ends = tokio::time::sleep(shared.live.lifetime);
    // The slot is held by the stream and given back when it ends or its client leaves.
    let updates = updates(tab).take_until(ends).map(move |update| {
        let _held = &slot;
        update
    });
    Ok(Sse::new(updates)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response())
}

fn updates(tab: broadcast::Receiver<Arc<str>>) -> impl Stream<Item = Result<Event, Infallible>> {
    stream::unfold(tab, |mut tab| async move {
        loop {
            match tab.recv().await {
                Ok(update) => {
                    return Some((Ok(Event::default().event("update").data(&*update)), tab))
                }
                // Behind: the next update carries the counts anyway.
                Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    })
}

/// The tab's side: counts in place; on a list, each listed job that moved marked with
/// its new state, and a note that the list changed; on a job's page, its state chip
/// and a note. Served from our own origin, as the CSP requires.
pub(super) const SCRIPT: &str = r#"(() => {
  const root = document.querySelector('[data-live]');
  if (!root || !window.EventSource) return;
  const job = root.dataset.job;
  const listed = root.dataset.state;
  const changed = () => {
    const note = root.querySelector('[data-changed]');
    if (note) note.hidden = false;
  };
  const tab = listed && document.querySelector(`[data-count="${listed}"]`);
  let shown = tab ? Number(tab.textContent) : null;
  const source = new EventSource(root.dataset.live);
  source.addEventListener('update', (message) => {
    const update = JSON.parse(message.data);
    const notice = document.querySelector('[data-unavailable]');
    if (notice) notice.hidden = !update.unavailable;
    if (update.unavailable) return;
    for (const [state, n] of Object.entries(update.counts)) {
      for (const el of document.querySelectorAll(`[data-count="${state}"]`)) el.textContent = n;
    }
    const moved = update.jobs || {};
    if (job !== undefined) {
      if (!(job in moved)) return;
      const state = moved[job];
      const chip = root.querySelector('h1 [data-state]');
      if (chip) {
        chip.textContent = state ?? 'removed';
        chip.className = 'chip' + (state === 'completed' ? ' good' : state === 'failed' ? ' bad' : '');
      }
      changed();
      return;
    }
    for (const row of root.querySelectorAll('tr[data-job]')) {
      if (!(row.dataset.job in moved)) continue;
      const state = moved[row.dataset.job];
      if (state === listed) continue;
      row.classList.add('moved');
      const cell = row.querySelector('[data-live-state]');
      if (cell) cell.textContent = '→ ' + (state ?? 'removed');
    }
    const count = update.counts[listed];
    if (shown !== null && count !== shown) changed();
    shown = count;
  });
})();
"#;

/// Serves [`SCRIPT`].
pub(super) async fn script() -> Response {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/javascript; charset=utf-8",
        )],
        SCRIPT,
    )
        .into_response()
}
