//! The pages' handlers: each checks what the request asks for, reads what the page shows
//! in a bounded number of Redis commands whatever the queue's size (`load`), and renders
//! it (`view`).
//!
//! A new page is a handler here, a loader and a view, a route in `Dashboard::router`,
//! and a link from the queue page's `nav.sub` (as the queue's groups have).

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Redirect};
use axum::Extension;
use queue_axum::access::Access;

use crate::action::bulk;
use crate::base::Base;
use crate::load;
use crate::problem::{job_id, PageResult, Problem};
use crate::query::{Cursor, GroupsQuery, Listing, QueueQuery, WorkersQuery};
use crate::state::searches::Searcher;
use crate::state::Shared;
use crate::text::url_segment;
use crate::view;

/// `/`: Redis's health, then every queue.
pub(super) async fn overview(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
) -> PageResult {
    let overview = load::overview::read(&shared.app).await?;
    Ok(view::overview::page(&base, access.who(), &overview).into_response())
}

/// `/{queue}?state=..&page=..&q=..`: a queue's counts, actions and one state's jobs
/// (or a search's matches); `?id=` goes to that job's page.
pub(super) async fn queue(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    searcher: Searcher,
    base: Base,
    Path(name): Path<String>,
    Query(query): Query<QueueQuery>,
) -> PageResult {
    let queue = shared.queue(&name)?;
    if let Some(id) = query
        .id
        .as_deref()
        .map(str::trim)
        .filter(|id| !id.is_empty())
    {
        let to = format!("{}/jobs/{}", base.queue(&name), url_segment(id));
        return Ok(Redirect::to(&to).into_response());
    }
    // A payload's field is searched only for those the policy shows payloads: a search
    // that answers "found" or "not found" reads the payload too, a guess at a time.
    let listing = Listing::of(&query, shared.payload_search && access.sees_payloads())?;
    // A search reads through thousands of jobs where a page reads fifty: one at a time
    // per person, and so many a minute (`state::searches`), held until it is read. A
    // refused one has cost Redis nothing.
    let _search = match listing.search {
        Some(_) => Some(shared.searches.start(searcher)?),
        None => None,
    };
    let read = load::queue::read(&queue, &listing).await?;
    let offered: Vec<_> = if access.can_act() {
        bulk::offered(listing.state).collect()
    } else {
        Vec::new()
    };
    Ok(view::queue::page(&base, &access, &name, &listing, &read, &offered).into_response())
}

/// `/{queue}/jobs/{id}`: one job.
pub(super) async fn job(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
    Path((name, id)): Path<(String, String)>,
) -> PageResult {
    let queue = shared.queue(&name)?;
    let id = job_id(&name, &id)?;
    let job = load::job::read(&shared.app, &access, &queue, &name, id)
        .await?
        .ok_or_else(|| Problem::no_job(&name, id))?;
    Ok(view::job::page(&base, &access, &name, &job).into_response())
}

/// `/{queue}/groups?after=..&count=..`: a queue's fair groups, a page at a time.
pub(super) async fn groups(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
    Path(name): Path<String>,
    Query(query): Query<GroupsQuery>,
) -> PageResult {
    let queue = shared.queue(&name)?;
    let cursor = Cursor::checked(query.after.as_deref(), query.count.as_deref())?;
    let read = load::groups::read(&queue, &cursor).await?;
    Ok(view::groups::page(&base, &access, &name, &cursor, &read).into_response())
}

/// `/{queue}/schedulers`: the queue's job schedulers.
pub(super) async fn schedulers(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
    Path(name): Path<String>,
) -> PageResult {
    let queue = shared.queue(&name)?;
    let schedulers = load::schedulers::read(&queue).await?;
    Ok(view::schedulers::page(&base, &access, &name, &schedulers).into_response())
}

/// `/-/workers?queue=..`: who works the app's queues (or one of them).
pub(super) async fn workers(
    State(shared): State<Arc<Shared>>,
    Extension(access): Extension<Access>,
    base: Base,
    Query(query): Query<WorkersQuery>,
) -> PageResult {
    let queues = match query.queue.as_deref().filter(|q| !q.is_empty()) {
        Some(name) => {
            shared.queue(name)?;
            vec![name.to_owned()]
        }
        None => shared.app.known_queues(),
    };
    let read = load::workers::read(&shared.app, queues).await?;
    Ok(view::workers::page(&base, access.who(), &read).into_response())
}

/// `/{queue}/workers`: the workers page narrowed to the queue.
pub(super) async fn workers_of_queue(base: Base, Path(name): Path<String>) -> PageResult {
    let to = format!("{}?queue={}", base.workers(), url_segment(&name));
    Ok(Redirect::to(&to).into_response())
}
