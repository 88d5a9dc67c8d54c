//! `JobError`: how a handler says an attempt failed, and whether retrying can help.
//! It lives beside `Job<T>` rather than with the handlers that return it, because
//! `Job::child_results` and `ChildResults` fail with it too.

use std::fmt;

use crate::error::BoxError;

/// A failed attempt. Retryable by default (the job's attempts and backoff decide what
/// happens next); [`JobError::unrecoverable`] fails the job at once.
///
/// `?` works in a handler on anything that converts into `Box<dyn Error + Send + Sync>`,
/// each a retryable `JobError`: any `std::error::Error + Send + Sync`,
/// `Box<dyn Error + Send + Sync>` itself, [`anyhow::Error`](https://docs.rs/anyhow) (no
/// feature needed: anyhow converts into that box), `eyre::Report`, and a `String` or
/// `&str` message. The reason stored on the job is the error's message followed by each
/// of its causes (`context: cause: root cause`, as `anyhow` prints with `{:#}`), so a
/// context added with `anyhow::Context` loses nothing.
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
///
/// // A boxed error from a library that returns one, and a plain message:
/// fn port(text: &str) -> Result<u16, Box<dyn std::error::Error + Send + Sync>> {
///     Ok(text.parse()?)
/// }
/// fn connect(text: &str) -> Result<(), JobError> {
///     let port = port(text)?;                           // retryable
///     if port < 1024 {
///         Err(format!("port {port} is privileged"))?;     // retryable, this message
///     }
///     Ok(())
/// }
/// assert!(connect("x").unwrap_err().is_retryable());
/// assert_eq!(connect("80").unwrap_err().message(), "port 80 is privileged");
/// ```
///
/// `JobError` itself does not implement `std::error::Error`: if it did, the conversion
/// above would convert it into itself a second way, which Rust refuses.
pub struct JobError {
    retryable: bool,
    message: String,
    source: Option<BoxError>,
    /// What the attempt's record takes from a failure shared by many attempts (a
    /// batch's), which no source carries: boxed, as it is rare.
    shared: Option<Box<SharedFailure>>,
}

/// How a batch's failure, given to each of its jobs, ended each job's attempt: its
/// handler's timeout or not, and the stack text the job records (the error's chain,
/// or where the handler panicked).
#[derive(Debug, Clone, Default)]
pub(crate) struct SharedFailure {
    pub(crate) timed_out: bool,
    pub(crate) stack: Option<String>,
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
            message: with_causes(&*source),
            source: Some(source),
            shared: None,
        }
    }

    pub(crate) fn unrecoverable_msg(message: impl Into<String>) -> Self {
        JobError {
            retryable: false,
            message: message.into(),
            source: None,
            shared: None,
        }
    }

    /// A failure with this reason and no source, retryable or not.
    pub(crate) fn with_message(retryable: bool, message: impl Into<String>) -> Self {
        JobError {
            retryable,
            message: message.into(),
            source: None,
            shared: None,
        }
    }

    /// One job's copy of a failure shared by a batch: its reason, whether it is
    /// retryable, and how the attempt ended.
    pub(crate) fn shared(retryable: bool, message: &str, shared: SharedFailure) -> Self {
        JobError {
            shared: Some(Box::new(shared)),
            ..JobError::with_message(retryable, message)
        }
    }

    /// Whether the attempt ended at its handler's timeout (a batch's).
    pub(crate) fn timed_out(&self) -> bool {
        self.shared.as_ref().is_some_and(|s| s.timed_out)
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

    /// What the job's `stacktrace` records of this failure when the error has causes:
    /// the reason, then each cause on its own line, as `anyhow` prints a chain. `None`
    /// when the reason says it all.
    pub(crate) fn chain_text(&self) -> Option<String> {
        if let Some(shared) = &self.shared {
            return shared.stack.clone();
        }
        let mut cause = self.source.as_deref()?.source();
        cause?;
        let mut text = format!("{}\nCaused by:", self.message);
        let mut depth = 0;
        while let Some(next) = cause {
            text.push_str(&format!("\n    {depth}: {next}"));
            depth += 1;
            cause = next.source();
        }
        Some(text)
    }
}

/// Any error, boxed error or message, as a retryable failure: what makes `?` work in a
/// handler. (A bound on `std::error::Error` would leave out `anyhow::Error` and
/// `Box<dyn Error + Send + Sync>`, neither of which implements it; a second `From` impl
/// for them beside such a bound is refused by Rust's coherence rules.)
impl<E> From<E> for JobError
where
    E: Into<BoxError>,
{
    fn from(error: E) -> Self {
        JobError::retry(error)
    }
}

/// `error: cause: root cause`: the message and every source below it, each skipped when
/// the message so far already says it (errors that print their cause themselves).
fn with_causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut message = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        let text = next.to_string();
        if !text.is_empty() && !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        cause = next.source();
    }
    message
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = f.debug_struct("JobError");
        out.field("retryable", &self.retryable)
            .field("message", &self.message);
        // The source is not shown: the message already holds its chain as Display
        // writes it, and a source's Debug may show what its Display leaves out (a
        // secret in a field) or a backtrace. A batch's shared failure is shown: no
        // message says whether the attempt timed out.
        if let Some(shared) = &self.shared {
            out.field("timed_out", &shared.timed_out)
                .field("stack", &shared.stack);
        }
        out.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);

    impl fmt::Display for Layer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Layer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|l| l as _)
        }
    }

    #[test]
    fn the_reason_keeps_every_cause_once() {
        let chain = Layer(
            "sending the welcome mail",
            Some(Box::new(Layer(
                "smtp refused",
                Some(Box::new(Layer("timed out", None))),
            ))),
        );
        assert_eq!(
            JobError::from(chain).message(),
            "sending the welcome mail: smtp refused: timed out"
        );
        // A cause the message already names is not repeated.
        let says_it = Layer(
            "smtp refused: timed out",
            Some(Box::new(Layer("timed out", None))),
        );
        assert_eq!(JobError::from(says_it).message(), "smtp refused: timed out");
    }

    #[test]
    fn the_chain_text_puts_each_cause_on_its_own_line() {
        let chain = Layer(
            "sending the welcome mail",
            Some(Box::new(Layer(
                "smtp refused",
                Some(Box::new(Layer("timed out", None))),
            ))),
        );
        assert_eq!(
            JobError::from(chain).chain_text().as_deref(),
            Some(
                "sending the welcome mail: smtp refused: timed out\nCaused by:\n    0: smtp refused\n    1: timed out"
            )
        );
        assert_eq!(JobError::from("no causes").chain_text(), None);
    }

    #[test]
    fn debug_shows_how_a_batchs_failure_ended_and_no_source_fields() {
        let plain = JobError::unrecoverable_msg("bad address");
        assert_eq!(
            format!("{plain:?}"),
            r#"JobError { retryable: false, message: "bad address" }"#
        );
        // A source's own fields stay out: its Display chain is the message.
        let sourced = JobError::retry(Layer(
            "smtp refused",
            Some(Box::new(Layer("connection reset", None))),
        ));
        assert_eq!(
            format!("{sourced:?}"),
            r#"JobError { retryable: true, message: "smtp refused: connection reset" }"#
        );
        let timed_out = SharedFailure {
            timed_out: true,
            stack: Some("the batch timed out after 5s".to_owned()),
        };
        let shared = JobError::shared(true, "the batch timed out after 5s", timed_out);
        assert_eq!(
            format!("{shared:?}"),
            r#"JobError { retryable: true, message: "the batch timed out after 5s", timed_out: true, stack: Some("the batch timed out after 5s") }"#
        );
    }

    #[test]
    fn messages_and_boxed_errors_convert_retryably() {
        let boxed: BoxError = "disk full".into();
        let from_box = JobError::from(boxed);
        assert!(from_box.is_retryable());
        assert_eq!(from_box.message(), "disk full");
        assert_eq!(JobError::from("plain").message(), "plain");
        assert_eq!(JobError::from(String::from("owned")).message(), "owned");
        assert!(JobError::unrecoverable("no").source().is_some());
    }
}
