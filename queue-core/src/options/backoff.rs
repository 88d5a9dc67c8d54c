//! Backoff: how long a failed job waits before its next attempt.

use std::time::Duration;

/// The wait between a failed attempt and the next one.
///
/// ```
/// use std::time::Duration;
/// use queue_core::Backoff;
///
/// let b = Backoff::exponential(Duration::from_secs(3));
/// let waits: Vec<_> = (1..=5).map(|n| b.delay_after(n).unwrap().as_secs()).collect();
/// assert_eq!(waits, [3, 6, 12, 24, 48]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backoff {
    /// The same wait after every failure.
    Fixed(Duration),
    /// `base`, then `2 * base`, `4 * base`, ...: BullMQ's exponential strategy.
    Exponential(Duration),
    /// A strategy registered on the app under this name
    /// ([`QueueAppBuilder::backoff_strategy`](crate::QueueAppBuilder::backoff_strategy)).
    Custom(String),
}

impl Backoff {
    /// The same wait after every failure.
    pub fn fixed(delay: Duration) -> Self {
        Backoff::Fixed(delay)
    }

    /// `base` after the first failure, doubling after each one after that.
    pub fn exponential(base: Duration) -> Self {
        Backoff::Exponential(base)
    }

    /// A strategy registered on the app under `name`.
    pub fn custom(name: impl Into<String>) -> Self {
        Backoff::Custom(name.into())
    }

    /// The wait after failed attempt number `attempt` (1-based), for the built-in
    /// strategies; `None` for a custom one, which the app's registry decides.
    pub fn delay_after(&self, attempt: u32) -> Option<Duration> {
        match self {
            Backoff::Fixed(d) => Some(*d),
            Backoff::Exponential(base) => {
                let factor = 2u32.checked_pow(attempt.saturating_sub(1))?;
                base.checked_mul(factor)
            }
            Backoff::Custom(_) => None,
        }
    }
}

/// What a custom backoff strategy is told about the failure it answers.
#[derive(Debug, Clone)]
pub struct BackoffContext<'a> {
    /// The attempt that just failed, 1-based.
    pub attempt: u32,
    /// The failure reason of that attempt.
    pub reason: &'a str,
    /// The job's payload as JSON.
    pub data: &'a serde_json::Value,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_doubles_from_the_base() {
        let b = Backoff::exponential(Duration::from_millis(100));
        assert_eq!(b.delay_after(1), Some(Duration::from_millis(100)));
        assert_eq!(b.delay_after(4), Some(Duration::from_millis(800)));
        assert_eq!(b.delay_after(40), None, "overflow is reported, not wrapped");
    }

    #[test]
    fn fixed_is_constant_and_custom_is_deferred() {
        assert_eq!(
            Backoff::fixed(Duration::from_secs(2)).delay_after(9),
            Some(Duration::from_secs(2))
        );
        assert_eq!(Backoff::custom("jitter").delay_after(1), None);
    }
}
