//! Log events as text, for tests that assert what an app logs.

use std::sync::{Arc, Mutex};

use tracing_subscriber::layer::{Context, SubscriberExt};

/// One log event: its level, target and `field=value ...` text (the message included).
#[derive(Debug, Clone)]
pub struct LogEvent {
    /// `INFO`, `WARN`, ...
    pub level: tracing::Level,
    /// The event's target (its module, unless set).
    pub target: String,
    /// Every field as `name=value `, `message` first.
    pub fields: String,
}

/// A subscriber that gives every event to `keep`.
pub fn recorder(keep: impl Fn(LogEvent) + Send + Sync + 'static) -> impl tracing::Subscriber {
    struct Recorder<F>(F);
    struct Fields(String);
    impl tracing::field::Visit for Fields {
        fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
            self.0.push_str(&format!("{}={:?} ", field.name(), value));
        }
        fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
            self.0.push_str(&format!("{}={} ", field.name(), value));
        }
    }
    impl<S: tracing::Subscriber, F: Fn(LogEvent) + Send + Sync + 'static>
        tracing_subscriber::Layer<S> for Recorder<F>
    {
        fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
            let mut fields = Fields(String::new());
            event.record(&mut fields);
            (self.0)(LogEvent {
                level: *event.metadata().level(),
                target: event.metadata().target().to_owned(),
                fields: fields.0,
            });
        }
    }
    tracing_subscriber::registry().with(Recorder(keep))
}

/// Every event, kept in memory: set it for a block with
/// `tracing::subscriber::set_default(logs.subscriber())`.
#[derive(Debug, Clone, Default)]
pub struct Logs(Arc<Mutex<Vec<LogEvent>>>);

impl Logs {
    /// A subscriber that records into this.
    pub fn subscriber(&self) -> impl tracing::Subscriber {
        let events = self.0.clone();
        recorder(move |event| events.lock().expect("log lock").push(event))
    }

    /// Every event recorded so far, in order.
    pub fn all(&self) -> Vec<LogEvent> {
        self.0.lock().expect("log lock").clone()
    }

    /// The events recorded at `level`.
    pub fn at(&self, level: tracing::Level) -> Vec<LogEvent> {
        self.0
            .lock()
            .expect("log lock")
            .iter()
            .filter(|e| e.level == level)
            .cloned()
            .collect()
    }
}
