//! Watching jobs: a job's changes as they happen ([`JobWatcher`]), and how a wait for a
//! job's outcome ends ([`JobOutcome`]; the waits themselves are
//! [`AddedJob::wait`](crate::AddedJob::wait) and
//! [`Queue::wait_for_job`](crate::Queue::wait_for_job)).
//!
//! Every watcher of a queue's jobs in this process shares one reader of the queue's
//! Redis event stream (`<prefix>:<queue>:events`), started by the first and stopped a
//! moment after the last has gone: five thousand waits on one queue hold one Redis
//! connection, not five thousand.
//!
//! No wake-up is lost between an `add` and a wait: a wait subscribes first, then reads
//! the job's state. A job that finished before the subscription is in the state read;
//! one that finishes after is in an event the reader delivers.

#[cfg(feature = "__private")]
mod hook;
mod hub;
mod outcome;

#[cfg(feature = "__private")]
pub(crate) use hook::{before_watch, set_before_watch};
pub(crate) use hub::JobWatch;
pub use hub::{JobWatcher, WatchStats};
pub(crate) use outcome::typed;
pub use outcome::JobOutcome;
