//! Which of a job's values a ciphertext stands for.

/// Which of a job's values a ciphertext is: bound into it, so that one does not open
/// as the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Field {
    /// The job's data.
    Data,
    /// What its handler returned.
    ReturnValue,
    /// Why an attempt failed (BullMQ's `failedReason`, and the attempt's entry in
    /// `stacktrace`).
    FailedReason,
    /// A line of the job's log.
    Log,
}

impl Field {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Field::Data => "data",
            Field::ReturnValue => "returnvalue",
            Field::FailedReason => "failedreason",
            Field::Log => "log",
        }
    }
}
