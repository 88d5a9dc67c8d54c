//! Log events as text, for tests that assert what an app logs.

use std::cell::RefCell;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, OnceLock};

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

impl LogEvent {
    /// `event` as text.
    fn of(event: &tracing::Event<'_>) -> LogEvent {
        struct Fields(String);
        impl tracing::field::Visit for Fields {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                self.0.push_str(&format!("{}={:?} ", field.name(), value));
            }
            fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
                self.0.push_str(&format!("{}={} ", field.name(), value));
            }
        }
        let mut fields = Fields(String::new());
        event.record(&mut fields);
        LogEvent {
            level: *event.metadata().level(),
            target: event.metadata().target().to_owned(),
            fields: fields.0,
        }
    }
}

/// A subscriber that gives every event to `keep`.
pub fn recorder(keep: impl Fn(LogEvent) + Send + Sync + 'static) -> impl tracing::Subscriber {
    struct Recorder<F>(F);
    impl<S: tracing::Subscriber, F: Fn(LogEvent) + Send + Sync + 'static>
        tracing_subscriber::Layer<S> for Recorder<F>
    {
        fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
            (self.0)(LogEvent::of(event));
        }
    }
    tracing_subscriber::registry().with(Recorder(keep))
}

thread_local! {
    /// Where this thread's events go while a [`Logs::capture`] lasts.
    static CAPTURE: RefCell<Option<Logs>> = const { RefCell::new(None) };
}

/// The process's global subscriber that [`Logs::capture`] installs: each event to the
/// [`Logs`] its thread captures into, if any (formatted only then).
fn install_thread_router() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        struct Router;
        impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Router {
            fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
                CAPTURE.with(|capture| {
                    if let Some(logs) = &*capture.borrow() {
                        logs.0.lock().expect("log lock").push(LogEvent::of(event));
                    }
                });
            }
        }
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(Router))
            .expect("Logs::capture's subscriber is the only global one of its test binary");
    });
}

/// While it lives, the thread's events go to a [`Logs`] ([`Logs::capture`]).
#[derive(Debug)]
#[must_use = "the capture ends when this is dropped"]
pub struct Capture {
    /// Ends on the thread it began on.
    _thread: PhantomData<*const ()>,
}

impl Drop for Capture {
    fn drop(&mut self) {
        CAPTURE.with(|capture| *capture.borrow_mut() = None);
    }
}

/// Every event, kept in memory: of this thread while a [`Logs::capture`] lasts (the way
/// for a test binary whose other tests log at the same time), or of a block with
/// `tracing::subscriber::set_default(logs.subscriber())`.
#[derive(Debug, Clone, Default)]
pub struct Logs(Arc<Mutex<Vec<LogEvent>>>);

impl Logs {
    /// Records this thread's events until the guard drops, through one global subscriber
    /// of the process that routes each event to the thread's `Logs`. Unlike a thread's
    /// own subscriber (`set_default`), it cannot miss an event whose call site another
    /// test thread registered at the same moment: a call site's interest is cached for
    /// the whole process, and the global subscriber is always among those asked.
    pub fn capture(&self) -> Capture {
        install_thread_router();
        CAPTURE.with(|capture| *capture.borrow_mut() = Some(self.clone()));
        Capture {
            _thread: PhantomData,
        }
    }

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

/// The lines among `events` that say the same thing twice: the same message, of the
/// same target, about the same `queue=` (an error's text aside). What an outage budget
/// (#28) forbids: each component says once that it lost Redis and once that it has it
/// back. Each with how often it came.
pub fn repeated_lines(events: &[LogEvent]) -> Vec<(String, usize)> {
    let mut seen: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    for event in events {
        let queue = event
            .fields
            .split_whitespace()
            .find(|f| f.starts_with("queue="))
            .unwrap_or_default();
        let message = event
            .fields
            .split(" queue=")
            .next()
            .unwrap_or_default()
            .split(" error=")
            .next()
            .unwrap_or_default();
        *seen
            .entry(format!("{} {message} {queue}", event.target))
            .or_insert(0) += 1;
    }
    seen.into_iter().filter(|(_, n)| *n > 1).collect()
}

/// `events` one a line, `LEVEL target fields`, for a failed assertion's message.
pub fn as_text(events: &[LogEvent]) -> String {
    events
        .iter()
        .map(|e| format!("{} {} {}", e.level, e.target, e.fields))
        .collect::<Vec<_>>()
        .join("\n")
}
