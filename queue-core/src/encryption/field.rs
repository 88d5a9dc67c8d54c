//! Which of a job's values a ciphertext stands for.

/// Which of a job's values a ciphertext is: bound into it, so that one does not open
/// as the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Field {
    /// The job's data.
    Data,
    /// What its handler returned.
    ReturnValue,
}

impl Field {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Field::Data => "data",
            Field::ReturnValue => "returnvalue",
        }
    }
}
