//! A job's live stream: `GET /jobs/{queue}/{id}/events`, server-sent events.
//!
//! Every event carries the job's whole status (what the status route answers), so the
//! latest one is all a client needs: `state` when the state changed (read from Redis),
//! `progress` for each progress update (the update itself, on the status last sent),
//! `gone` when the job was removed. The stream starts with the
//! current state and ends after the job finished. A reconnection (`Last-Event-ID`)
//! starts with the current state again, which holds every change made meanwhile; one
//! whose last event was the finished state (`id: finished`) is answered 204, which
//! tells an `EventSource` to stop.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::stream::{self, Stream, StreamExt};
use queue_core::{watch::JobWatcher, JobState, Queue, QueueApp, QueueEvent};

use super::settings::JobRoutes;
use super::status::{lookup, no_job, unknown_queue, JobStatus, Lookup};
use super::stream_slots::{Full, StreamSlot};
use crate::error::QueueError;
use crate::extract::app_of;

/// The id of the event that carries a finished state.
const FINISHED_ID: &str = "finished";

pub(super) async fn stream(
    State(settings): State<JobRoutes>,
    Path((queue, id)): Path<(String, String)>,
    parts: Parts,
) -> Response {
    let app = match app_of(&parts) {
        Ok(app) => app,
        Err(rejection) => return rejection.into_response(),
    };
    let handle = match settings.serves(&app, &queue) {
        true => app.queue::<()>(&queue).ok(),
        false => None,
    };
    let Some(handle) = handle else {
        return unknown_queue(&queue);
    };
    if !queue_core::options::could_be_job_id(&id) {
        return no_job(&queue, &id);
    }
    let client = settings.client.of(&parts);
    let slot = match settings.live_streams.take(format!("{queue}/{id}"), client) {
        Ok(slot) => slot,
        Err(full) => return refused(full, &queue, &id),
    };
    // Subscribed before the first read: a change in between is in one or the other.
    let watcher = tokio::time::timeout(settings.redis_wait, handle.watch_job(&id)).await;
    let watcher = match watcher {
        Ok(Ok(watcher)) => watcher,
        Ok(Err(e)) => return QueueError::from(e).into_response(),
        Err(_) => {
            let e = queue_core::Error::Timeout {
                what: "the job's live stream",
                after: settings.redis_wait,
            };
            return QueueError::from(e).into_response();
        }
    };
    let first = match lookup(&app, &queue, &id, &settings).await {
        Ok(Some(status)) => status,
        Ok(None) => return no_job(&queue, &id),
        Err(Lookup::UnknownQueue) => return unknown_queue(&queue),
        Err(Lookup::Queue(e)) => return e.into_response(),
    };
    let resumed = parts
        .headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok());
    if resumed == Some(FINISHED_ID) && finished(&first) {
        // The client saw the end already: 204 stops its EventSource reconnecting.
        return StatusCode::NO_CONTENT.into_response();
    }
    let live = Live {
        app,
        handle,
        id,
        settings: settings.clone(),
        watcher: Some(watcher),
        first: Some(first),
        last: None,
        seq: 0,
        done: false,
        _slot: slot,
    };
    let ends = tokio::time::sleep(settings.live_stream_lifetime);
    Sse::new(events(live).take_until(ends))
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

/// A stream past a cap: 503 when every stream is taken (we are full), 429 when this
/// job or this client has its share (the client's own doing).
fn refused(full: Full, queue: &str, id: &str) -> Response {
    let (status, message) = match full {
        Full::All => (
            StatusCode::SERVICE_UNAVAILABLE,
            "every live stream is taken; poll the job's status route instead, or try again later",
        ),
        Full::Job => (
            StatusCode::TOO_MANY_REQUESTS,
            "this job has its most live streams open; close one, or poll the job's status route",
        ),
        Full::Client => (
            StatusCode::TOO_MANY_REQUESTS,
            "this client has its most live streams open; close one, or poll the job's status route",
        ),
    };
    tracing::debug!(%queue, job_id = %id, ?full, "a live stream refused");
    (
        status,
        [(header::RETRY_AFTER, "30")],
        axum::Json(serde_json::json!({
            "error": "too many live streams",
            "message": message,
        })),
    )
        .into_response()
}

fn finished(status: &JobStatus) -> bool {
    status.state.is_some_and(JobState::is_finished)
}

/// One stream's state between events. Holds its slot of the streams' cap until it ends
/// or its client leaves (then its watcher leaves the queue's reader too).
struct Live {
    app: QueueApp,
    handle: Queue<()>,
    id: String,
    settings: JobRoutes,
    watcher: Option<JobWatcher>,
    /// The status read when the stream opened, sent first.
    first: Option<JobStatus>,
    /// The last status sent: its state, and its JSON.
    last: Option<(Option<JobState>, serde_json::Value)>,
    seq: u64,
    done: bool,
    _slot: StreamSlot,
}

impl Live {
    /// `status` as the event to send, or `None` when the client has seen it already.
    /// With `in_order`, the progress stays the one last sent while the job runs: the
    /// updates since are in events still to come, and a read ahead of them would make
    /// the progress go back when they arrive.
    fn event(&mut self, status: &JobStatus, in_order: bool) -> Option<Event> {
        let mut json = serde_json::to_value(status).ok()?;
        if let (true, false, Some((_, sent))) = (in_order, finished(status), &self.last) {
            json["progress"] = sent["progress"].clone();
        }
        self.event_of(status.state, json)
    }

    fn event_of(&mut self, state: Option<JobState>, json: serde_json::Value) -> Option<Event> {
        let kind = match &self.last {
            Some((_, sent)) if *sent == json => return None,
            Some((sent, _)) if *sent == state => "progress",
            _ => "state",
        };
        let data = json.to_string();
        self.last = Some((state, json));
        let id = if state.is_some_and(JobState::is_finished) {
            self.done = true;
            FINISHED_ID.to_owned()
        } else {
            self.seq += 1;
            self.seq.to_string()
        };
        Some(Event::default().event(kind).id(id).data(data))
    }

    /// A progress update as the event carries it, on the status last sent: read
    /// again, the job might already be past it (the next step, or finished), and the
    /// client would miss the update.
    fn progress(&mut self, progress: serde_json::Value) -> Option<Event> {
        let (state, mut json) = self.last.clone()?;
        if state.is_some_and(JobState::is_finished) {
            return None;
        }
        json["progress"] = progress;
        self.event_of(state, json)
    }

    /// Waits for the job's next change; `None` ends the stream (the client reconnects
    /// and starts from the current state).
    async fn next_change(&mut self) -> Option<Event> {
        loop {
            let watcher = match &mut self.watcher {
                Some(watcher) => watcher,
                None => {
                    // Behind, or the reader stopped: watch anew, then read.
                    self.watcher = Some(self.handle.watch_job(&self.id).await.ok()?);
                    if let Some(event) = self.read(false).await? {
                        return Some(event);
                    }
                    continue;
                }
            };
            let change = match watcher.next().await {
                Some(QueueEvent::Progress { data, .. }) => self.progress(data),
                Some(_) => self.read(true).await?,
                None => {
                    self.watcher = None;
                    continue;
                }
            };
            if let Some(event) = change {
                return Some(event);
            }
        }
    }

    /// The job's status now, as an event if it changed; `None` when it cannot be read
    /// (the stream ends); `Some(None)` when nothing the client sees changed.
    async fn read(&mut self, in_order: bool) -> Option<Option<Event>> {
        let queue = self.handle.name().to_owned();
        match lookup(&self.app, &queue, &self.id, &self.settings).await {
            Ok(Some(status)) => Some(self.event(&status, in_order)),
            Ok(None) => {
                self.done = true;
                Some(Some(Event::default().event("gone").data("{}")))
            }
            Err(_) => None,
        }
    }
}

fn events(live: Live) -> impl Stream<Item = Result<Event, Infallible>> {
    stream::unfold(live, |mut live| async move {
        if let Some(first) = live.first.take() {
            if let Some(event) = live.event(&first, false) {
                return Some((Ok(event), live));
            }
        }
        if live.done {
            return None;
        }
        // A job with nothing to tell for the idle limit ends its stream: the client
        // reconnects and starts from the job's current state.
        let idle = live.settings.live_stream_idle;
        let event = tokio::time::timeout(idle, live.next_change())
            .await
            .ok()??;
        Some((Ok(event), live))
    })
}
