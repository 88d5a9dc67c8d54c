//! The bounds that keep each page's cost fixed whatever the queue's size: how much a
//! page lists, a search looks at, an action takes, a page shows of a job.

use queue_core::JobState;

/// Jobs on one page of a queue.
pub const PAGE_SIZE: usize = 50;

/// The states a queue page lists, in the order of a job's life.
pub(crate) const LISTED_STATES: [JobState; 7] = [
    JobState::Waiting,
    JobState::Prioritized,
    JobState::Delayed,
    JobState::Active,
    JobState::WaitingChildren,
    JobState::Completed,
    JobState::Failed,
];

/// The length (in characters) a listed string is cut to.
pub(crate) const LISTED_CHARS: usize = 120;

/// Bytes of each listed string Redis sends (a character is at most four).
pub(crate) const CLIP_BYTES: usize = LISTED_CHARS * 4;

/// How many jobs a search looks at per page: ids alone for an id prefix, a field of
/// each job for a name or a payload field.
pub(crate) const SCAN_IDS: usize = 20_000;
/// See [`SCAN_IDS`].
pub(crate) const SCAN_JOBS: usize = 5_000;

/// The most jobs one bulk action takes: a page's worth, with room.
pub(crate) const BULK_MAX: usize = PAGE_SIZE * 4;

/// The most groups one page shows (`count`).
pub(crate) const MAX_GROUPS_SHOWN: usize = PAGE_SIZE * 4;

/// The longest `after` a groups page takes. Not
/// [`MAX_GROUP_BYTES`](queue_core::options::MAX_GROUP_BYTES): that bounds the ids our
/// producers give, and a Node producer may name a longer group, which a next page must
/// still start after.
pub(crate) const MAX_AFTER_BYTES: usize = 4 * 1024;

/// Log lines a job's page reads (the last ones).
pub(crate) const LOG_LINES: usize = 100;

/// Schedulers a queue's schedulers page lists.
pub(crate) const SCHEDULERS_SHOWN: usize = 1_000;

/// The minutes of BullMQ's per-minute figures the overview draws.
pub(crate) const MINUTES: usize = 60;
