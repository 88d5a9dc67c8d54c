//! `GET /reports/{month}/events`: the report's status (what `GET /reports/{month}`
//! answers) live, as server-sent events: at once, then again each time one of its
//! steps moves, until the report is finished. Operator only, as the status is.
//!
//! The steps' jobs are watched through the queue's one shared event reader
//! (`Queue::watch_job`): a stream costs no Redis connection of its own.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::stream::{self, SelectAll, Stream, StreamExt};
use queue_core::{watch::JobWatcher, Queue};

use super::reports::{month, report_status};
use super::{ApiError, AppState, Producers};
use crate::jobs::reports::{step_job_id, REPORT_STEPS};
use crate::jobs::Report;

/// How long a stream lasts at most (the client reconnects, and starts from the status).
const LIFETIME: Duration = Duration::from_secs(600);

/// How often the status is read again when no step moved: a watcher that fell behind
/// ends, and this catches what it missed.
const RECHECK: Duration = Duration::from_secs(5);

/// One step's watcher as a stream of "it moved".
fn moves(watcher: JobWatcher) -> impl Stream<Item = ()> + Send {
    stream::unfold(watcher, |mut watcher| async move {
        watcher.next().await.map(|_| ((), watcher))
    })
}

/// The stream's state between events.
struct Live {
    state: AppState,
    queue: Queue<Report>,
    month: String,
    steps: SelectAll<std::pin::Pin<Box<dyn Stream<Item = ()> + Send>>>,
    last: Option<serde_json::Value>,
    done: bool,
}

impl Live {
    /// The status as an event, when it changed; `Err` ends the stream.
    async fn read(&mut self) -> Result<Option<Event>, ApiError> {
        let status = report_status(&self.state, &self.queue, &self.month).await?;
        if self.last.as_ref() == Some(&status) {
            return Ok(None);
        }
        let state = status["state"].as_str().unwrap_or_default();
        self.done = matches!(state, "completed" | "failed");
        let event = Event::default().event("report").data(status.to_string());
        self.last = Some(status);
        Ok(Some(event))
    }
}

pub(crate) async fn stream(
    State(state): State<AppState>,
    producers: Producers,
    Path(month_text): Path<String>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let month = month(&month_text, &state)?;
    let queue = producers.report.clone();
    // Watch every step first, then read: a move in between is in one or the other.
    let mut steps = SelectAll::new();
    for (step, _) in REPORT_STEPS {
        let watcher = queue.watch_job(&step_job_id(&month, step)).await?;
        steps.push(Box::pin(moves(watcher)) as std::pin::Pin<Box<dyn Stream<Item = ()> + Send>>);
    }
    let mut live = Live {
        state,
        queue,
        month,
        steps,
        last: None,
        done: false,
    };
    // A report never started is a 404, as for its status.
    let first = live.read().await?;
    let events = stream::unfold((live, first), |(mut live, first)| async move {
        if let Some(event) = first {
            return Some((Ok(event), (live, None)));
        }
        while !live.done {
            // Watchers that ended (behind) drop out of the set; the re-read covers them.
            let watching = !live.steps.is_empty();
            tokio::select! {
                _ = live.steps.next(), if watching => {}
                _ = tokio::time::sleep(RECHECK) => {}
            }
            match live.read().await {
                Ok(Some(event)) => return Some((Ok(event), (live, None))),
                Ok(None) => {}
                Err(_) => return None,
            }
        }
        None
    });
    Ok(Sse::new(events.take_until(tokio::time::sleep(LIFETIME)))
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}
