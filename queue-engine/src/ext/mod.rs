//! Our extensions of the engine, apart from upstream's files (PATCHES.md, part 2): each
//! is a module here, and upstream's files only hold the small hooks that call it. Every
//! Lua script of ours is in `commands/`, registered by `scripts.rs`.
//!
//! The fixes meant for upstream (PATCHES.md, part 1) stay where upstream's code is.

/// A worker that takes many jobs at once: its options and processor (change 36; the
/// worker's part is `batch_worker.rs`, a child of `worker.rs`).
pub mod batch;
/// The worker's bounded event channel (change 3).
pub(crate) mod event_channel;
/// A failed attempt's record on the job: reason and error chain on every failure
/// (change 20).
pub(crate) mod failure_record;
/// Finishing commands sent again after an outage, and fetches whose answer was lost
/// resumed (change 16).
pub(crate) mod finishing;
/// The grouped scripts as one Redis function library, run by `FCALL` (change 35).
pub(crate) mod functions;
/// A group's limits, which the worker's options name (change 21).
pub(crate) mod group_limits;
/// Fair groups: per-group round robin, concurrency and rate limits (change 21).
pub mod groups;
/// An operator's bounded reads: listing rows, a bounded search, the oldest waiting job
/// (change 28).
pub mod inspect;
/// What the lock scripts by id and token are sent, and their replies (changes 4, 15,
/// 16).
pub(crate) mod lock_script;
/// Locks taken back after an outage, and the jobs a worker's tokens hold (changes 15,
/// 16).
pub(crate) mod locks;
/// An outage logged once when it starts and once when it ends (change 19).
pub(crate) mod outage;
/// A cron scheduler's run that fell due while no worker ran is kept through an
/// upsert (change 31).
pub(crate) mod owed_run;
/// Where a job's processor runs: in its slot's task, or in a task of its own
/// (change 27).
pub(crate) mod processor_task;
/// The lookup of one of our scripts in the connection's registry.
pub(crate) mod registered;
/// The shared connection to one server, replaced when it goes silent (change 30).
pub mod renewing;
/// Our Lua scripts' registrations.
pub(crate) mod scripts;
/// Redis Sentinel: finding the master, and following it through a failover (change 14).
pub mod sentinel;
