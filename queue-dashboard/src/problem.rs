//! Why a page or an action could not be served: a status and a message (the page that
//! shows it is a view's, `view::error_page`).

use axum::response::Response;
use queue_axum::quote;

use crate::text::clip;

/// The job id in a path, if it could name a job. Checked before any read or action, as
/// the status route checks it: an id that names one of the queue's own keys (`meta`, or
/// `repeat:<scheduler>`, a scheduler's definition) is no job, and an action on it would
/// act on that key.
pub(crate) fn job_id<'a>(queue: &str, id: &'a str) -> Result<&'a str, Problem> {
    if queue_core::options::could_be_job_id(id) {
        Ok(id)
    } else {
        Err(Problem::no_job(queue, id))
    }
}

/// Why a page or an action could not be served.
#[derive(Debug)]
pub(crate) enum Problem {
    /// 404: no such queue, job or page.
    NotFound(String),
    /// 400: a bad parameter, with the reason.
    BadRequest(String),
    /// 429: over a bound the dashboard keeps per person (its searches), with the
    /// reason and the seconds after which to try again (`Retry-After`).
    TooMany { message: String, retry_after_s: u64 },
    /// What a queue call refused or could not do: the status and the text
    /// `QueueError` gives a client (503 when Redis is unavailable; nothing of our
    /// internals).
    Queue(Box<queue_core::Error>),
}

impl Problem {
    /// 404 for job `id` of `queue`, both cut for the page.
    pub(crate) fn no_job(queue: &str, id: &str) -> Problem {
        Problem::NotFound(format!(
            "No job {} in queue {}.",
            quote(&clip(id, 200)),
            quote(&clip(queue, 200))
        ))
    }

    /// 400 for an action this address does not take, naming the ones it does.
    pub(crate) fn unknown_action(action: &str, known: &str) -> Problem {
        Problem::BadRequest(format!(
            "{} is not an action here; the actions are: {known}.",
            quote(&clip(action, 100))
        ))
    }
}

impl From<queue_core::Error> for Problem {
    fn from(error: queue_core::Error) -> Self {
        Problem::Queue(Box::new(error))
    }
}

/// What a page handler answers.
pub(crate) type PageResult = Result<Response, Problem>;
