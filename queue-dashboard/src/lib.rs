//! A dashboard for every queue of the app, to mount under any path: server-rendered
//! pages (maud templates, escaping by default), embedded assets, no Node and no CDN.
//!
//! It cannot be built without an [`AccessPolicy`]: the application decides, for each
//! request, whether it is forbidden, read-only or an operator's, and whether payloads
//! show. There is no open default. Actions are POSTs, refused unless they come from the
//! dashboard's own origin (`Sec-Fetch-Site`, else `Origin` against `Host`); pages are
//! refused to other sites' scripts, frames and images (only a person following a link
//! opens one). Every action is logged with who, what and which job or group on the
//! [`AUDIT_TARGET`] tracing target, and every destructive one (drain, clean, remove,
//! obliterate, retry all) is confirmed on a page that says how many jobs it touches.
//!
//! A sealed payload or return value ([`queue_core::encryption`]) is shown as sealed,
//! with the id of its key, never as its ciphertext; it is opened on a job's page only
//! for a reader the policy lets reveal it ([`Access::with_reveal`]), and each opening
//! is logged on [`AUDIT_TARGET`] (who, queue, job, field, key; never the value). One
//! that does not open (its key not in the app's keyring, or altered) shows why in its
//! place. Searches never open one ([`Dashboard::payload_search`]). Sealed failure
//! reasons, attempt records and log lines (queue-core's `encrypt_failures_and_logs`)
//! likewise, on a job's page and in its flow (fields `failedReason`, `stacktrace`,
//! `log`); a queue's listing shows a sealed reason as sealed to every reader, and opens
//! none.
//!
//! Pages (one word per level under the mount point):
//! - `/`: Redis's health (memory against its limit, eviction policy, clients, version,
//!   ops/s) and every queue with its counts per state, the age of its oldest waiting
//!   job, and its throughput per minute;
//! - `/{queue}?state=failed&page=2`: a queue's jobs in one state, newest first, 50 a
//!   page, with bulk actions; `?q=` searches it (an id prefix, `name = ..`, or, where
//!   the application turns it on with [`Dashboard::payload_search`], a payload field,
//!   `data.user_id = 42`) in a bounded scan that says how far it got;
//! - `/{queue}/jobs/{id}`: one job: state, times and durations, its attempt history
//!   with each failure's reason and error chain, the next retry, progress, logs, its
//!   whole flow tree, and its payload and return value where the policy allows;
//! - `/{queue}/groups?after=..`: a queue's fair groups by id, 50 a page, each with its
//!   waiting and running jobs, whether it is paused and its own limits; pause and
//!   resume (POSTs to `/{queue}/groups/{pause|resume}` naming the `group`);
//! - `/{queue}/schedulers`, `/{queue}/add`, `/-/workers`.
//!
//! Each page costs Redis a bounded number of commands, whatever the queue's size;
//! listed strings are cut in Redis; a live page is sent changes (counts, the states of
//! the jobs that moved) by one reader per queue, never refetched. A search, which reads
//! through thousands of jobs, is also bounded per person: one at a time, and
//! [`DEFAULT_MAX_SEARCHES_PER_MINUTE`] a minute
//! ([`Dashboard::max_searches_per_minute`]); over that, 429 with `Retry-After`.
//!
//! ```no_run
//! use axum::Router;
//! use queue_dashboard::{Access, Dashboard};
//!
//! # fn demo(app: queue_core::QueueApp) {
//! // `x-operator` is set by the authenticating proxy in front of the app, which strips
//! // any copy a client sends; see `Access` for the levels.
//! let dashboard = Dashboard::new(&app, |request: &axum::http::request::Parts| {
//!     match request.headers.get("x-operator") {
//!         Some(_) => Access::operator("ops"),
//!         None => Access::forbidden(),
//!     }
//! });
//! let router: Router = Router::new().merge(dashboard.mount("/admin/queues"));
//! # }
//! ```
//!
//! The crate in floors, each importing only from those below it (`docs/architecture.md`
//! draws them, and `layer-check` holds them): [`Dashboard`] and its routes, and the
//! guard; the actions, each beside its confirmation; the views (every template); the
//! state and the loaders (what a page shows, read into plain data); what a request
//! asks for, parsed; the leaf helpers.

mod action;
mod audit;
mod base;
mod guard;
mod limits;
mod load;
mod problem;
mod query;
mod routes;
mod state;
mod text;
mod view;

pub use audit::AUDIT_TARGET;
pub use limits::PAGE_SIZE;
pub use load::live::{DEFAULT_LIVE_STREAM_LIFETIME, DEFAULT_MAX_LIVE_STREAMS};
pub use queue_axum::access::{Access, AccessPolicy, Credentials, InvalidSecret, Secret};
pub use state::searches::DEFAULT_MAX_SEARCHES_PER_MINUTE;
pub use state::Dashboard;
