//! The start-up checks' error: every problem found in the registrations.

use std::fmt;

/// The app refused to start: every problem found in the registrations, one per line.
///
/// ```
/// use queue_core::{Job, JobError, Processor, QueueApp};
///
/// async fn a(_job: Job<String>) -> Result<(), JobError> { Ok(()) }
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let err = QueueApp::builder()
///     .processor(Processor::new("email").job("welcome", a))
///     .processor(Processor::new("email").job("welcome", a))
///     .check()
///     .unwrap_err();
/// assert!(err.to_string().contains("claimed twice"));
/// # });
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct RegistryError {
    problems: Vec<String>,
}

impl RegistryError {
    pub(crate) fn from_problems(problems: Vec<String>) -> Result<(), Self> {
        if problems.is_empty() {
            Ok(())
        } else {
            Err(RegistryError { problems })
        }
    }

    /// Each problem, in queue order.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }
}

impl fmt::Display for RegistryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the queue app cannot start ({} problem(s)):",
            self.problems.len()
        )?;
        for problem in &self.problems {
            write!(f, "\n  - {problem}")?;
        }
        Ok(())
    }
}
