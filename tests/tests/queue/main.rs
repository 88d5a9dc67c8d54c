//! A queue's producer side and reads: adding jobs and their options, bad input
//! refused, payloads sealed at rest, a job's state read consistently, a manual retry.
//!
//! One test binary for the area, a module per subject; one module alone:
//! `cargo test -p queue-tests --test queue -- <module>::`.

mod bad_input;
mod encryption;
mod job_state;
mod manual_retry;
mod options;
mod producer;
