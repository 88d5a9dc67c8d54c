//! `JobError`: how a handler says an attempt failed, and whether retrying can help.
//! It lives beside `Job<T>` rather than with the handlers that return it, because
//! `Job::child_results` and `ChildResults` fail with it too.

use std::fmt;

use crate::error::BoxError;

/// A failed attempt. Retryable by default (the job's attempts and backoff decide what
/// happens next); [`JobError::unrecoverable`] fails the job at once.
///
/// Any `std::error::Error` converts into a retryable `JobError`, so `?` works in handlers.
///
/// ```
/// use queue_core::JobError;
///
/// fn parse(input: &str) -> Result<u32, JobError> {
///     let n: u32 = input.parse()?;                       // retryable by default
///     if n == 0 {
///         return Err(JobError::unrecoverable("zero is never valid")); // no retries
///     }
///     Ok(n)
/// }
/// assert!(parse("x").unwrap_err().is_retryable());
/// assert!(!parse("0").unwrap_err().is_retryable());
/// ```
pub struct JobError {
    retryable: bool,
    message: String,
    source: Option<BoxError>,
}

impl JobError {
    /// A failure that a later attempt may not repeat (network error, busy service).
    pub fn retry(error: impl Into<BoxError>) -> Self {
        Self::from_box(true, error.into())
    }

    /// A failure no retry can fix (bad input, a refused request): the job fails now.
    pub fn unrecoverable(error: impl Into<BoxError>) -> Self {
        Self::from_box(false, error.into())
    }

    fn from_box(retryable: bool, source: BoxError) -> Self {
        JobError {
            retryable,
            message: source.to_string(),
            source: Some(source),
        }
    }

    pub(crate) fn unrecoverable_msg(message: impl Into<String>) -> Self {
        JobError {
            retryable: false,
            message: message.into(),
            source: None,
        }
    }

    /// Whether the job's remaining attempts should be used.
    pub fn is_retryable(&self) -> bool {
        self.retryable
    }

    /// The failure reason stored on the job.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The underlying error, if one was given.
    pub fn source(&self) -> Option<&(dyn std::error::Error + Send + Sync + 'static)> {
        self.source.as_deref()
    }
}

impl<E> From<E> for JobError
where
    E: std::error::Error + Send + Sync + 'static,
{
    fn from(error: E) -> Self {
        JobError::retry(error)
    }
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobError")
            .field("retryable", &self.retryable)
            .field("message", &self.message)
            .finish()
    }
}
