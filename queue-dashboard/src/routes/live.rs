//! `GET /{queue}/live`: a queue's live feed, sent to one tab as server-sent events.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::IntoResponse;
use futures::stream::{self, Stream, StreamExt};
use tokio::sync::broadcast;

use crate::problem::PageResult;
use crate::state::Shared;

/// How often an idle stream says it is alive (proxies cut silent connections).
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The queue's updates, as `update` events, for at most the hub's lifetime; 503 when
/// the hub's streams are all taken (the page works on, without live counts).
pub(super) async fn stream(
    State(shared): State<Arc<Shared>>,
    Path(name): Path<String>,
) -> PageResult {
    shared.queue(&name)?;
    let Ok(slot) = shared.live.streams.clone().try_acquire_owned() else {
        tracing::debug!(queue = %name, "every live stream is taken; answering 503");
        return Ok((
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "30")],
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
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
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
