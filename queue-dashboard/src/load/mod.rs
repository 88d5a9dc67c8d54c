//! What each page shows, read into plain data (no markup): from Redis through the
//! queues' read API, in a bounded number of commands whatever a queue's size, or from
//! the app. The views render it; the live feed's reader is here too.

pub(crate) mod add_job;
pub(crate) mod flow;
pub(crate) mod groups;
pub(crate) mod job;
pub(crate) mod listing;
pub(crate) mod live;
pub(crate) mod notes;
pub(crate) mod overview;
pub(crate) mod payload;
pub(crate) mod queue;
pub(crate) mod schedulers;
pub(crate) mod workers;
