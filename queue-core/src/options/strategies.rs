//! Custom backoff strategies, registered on the app by name and checked at `add`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::error::Error;
use crate::options::{BackoffContext, JobOptions};

/// A custom backoff lookup: strategy name and failure -> wait, or `None` for no retry
/// (what the engine's worker asks when a job with a custom backoff fails).
pub(crate) type BackoffFn =
    Arc<dyn Fn(&str, &BackoffContext<'_>) -> Option<Duration> + Send + Sync>;

/// One registered strategy: the failure -> the wait, or `None` for no retry.
pub(crate) type StrategyFn = Arc<dyn Fn(&BackoffContext<'_>) -> Option<Duration> + Send + Sync>;

/// Custom backoff strategies by name.
#[derive(Clone, Default)]
pub(crate) struct BackoffRegistry(BTreeMap<String, StrategyFn>);

impl BackoffRegistry {
    /// Registers `strategy` under `name` (replacing one of the same name).
    pub(crate) fn register(&mut self, name: String, strategy: StrategyFn) {
        self.0.insert(name, strategy);
    }

    /// Refuses a custom backoff name this app does not know: the job could never retry.
    pub(crate) fn check(&self, opts: &JobOptions) -> Result<(), Error> {
        match &opts.backoff {
            Some(crate::options::Backoff::Custom(name)) if !self.0.contains_key(name) => Err(Error::invalid(
                "backoff",
                format!(
                    "no custom backoff strategy `{name}` is registered on the app (registered: {}); add it with `.backoff_strategy(..)`",
                    self.names()
                ),
            )),
            _ => Ok(()),
        }
    }

    fn names(&self) -> String {
        let names: Vec<&str> = self.0.keys().map(String::as_str).collect();
        if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        }
    }

    /// The lookup the engine's worker asks, if any strategy is registered.
    pub(crate) fn as_lookup(&self) -> Option<BackoffFn> {
        if self.0.is_empty() {
            return None;
        }
        let strategies = self.0.clone();
        Some(Arc::new(
            move |name: &str, ctx: &BackoffContext<'_>| match strategies.get(name) {
                Some(strategy) => strategy(ctx),
                None => {
                    tracing::error!(
                        strategy = name,
                        "unknown custom backoff strategy; the job will not be retried"
                    );
                    None
                }
            },
        ))
    }
}

impl std::fmt::Debug for BackoffRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}
