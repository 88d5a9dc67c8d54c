//! In-memory recording for jobs made with `Job::for_test`.

use std::sync::{Arc, Mutex, PoisonError};

use super::children::RawChildren;
use super::link::CancelSignal;

/// What a test job's handler reported.
#[derive(Debug, Default)]
pub(crate) struct Recorder {
    logs: Mutex<Vec<String>>,
    progress: Mutex<Vec<serde_json::Value>>,
    /// The flow children a test job was given.
    pub(crate) children: Mutex<RawChildren>,
}

impl Recorder {
    pub(crate) fn record_log(&self, line: &str) {
        self.logs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(line.to_owned());
    }

    pub(crate) fn record_progress(&self, value: serde_json::Value) {
        self.progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(value);
    }
}

/// Reads what a handler did with a [`Job::for_test`](crate::Job::for_test) job, and
/// cancels it, from outside the handler.
///
/// ```
/// use queue_core::Job;
///
/// let job = Job::for_test(());
/// let handle = job.test_handle();
/// handle.cancel();
/// assert!(job.is_cancelled());
/// ```
#[derive(Debug, Clone)]
pub struct TestJobHandle {
    recorder: Option<Arc<Recorder>>,
    cancel: CancelSignal,
}

impl TestJobHandle {
    pub(crate) fn new(recorder: Option<Arc<Recorder>>, cancel: CancelSignal) -> Self {
        TestJobHandle { recorder, cancel }
    }

    /// The log lines written so far.
    pub fn logs(&self) -> Vec<String> {
        self.recorder.as_ref().map_or_else(Vec::new, |r| {
            r.logs
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
        })
    }

    /// Every progress value reported so far, oldest first.
    pub fn progress(&self) -> Vec<serde_json::Value> {
        self.recorder.as_ref().map_or_else(Vec::new, |r| {
            r.progress
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
        })
    }

    /// Raise the job's cancellation signal, as `Queue::cancel` would.
    pub fn cancel(&self) {
        self.cancel.cancel();
    }
}
