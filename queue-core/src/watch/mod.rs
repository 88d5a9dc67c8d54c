//! Watching jobs: a job's changes as they happen ([`JobWatcher`]), and waiting for a
//! job's outcome ([`AddedJob::wait`](crate::AddedJob::wait),
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

mod hub;
mod wait;

pub(crate) use hub::JobWatch;
pub use hub::{JobWatcher, WatchStats};
#[cfg(feature = "__private")]
pub(crate) use wait::set_before_watch;
pub(crate) use wait::JobLink;
pub use wait::JobOutcome;
