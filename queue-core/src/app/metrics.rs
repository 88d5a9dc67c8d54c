//! The app's side of a scrape (feature `metrics`): it knows the queues whose depth a
//! scrape reads, the outbox whose backlog it shows and the memory guard's last reading.

use super::QueueApp;
use crate::error::Error;
use crate::metrics::{MemoryReading, Metrics, ScrapeSources};

impl Metrics {
    /// The metrics as OpenMetrics text ([`CONTENT_TYPE`](crate::metrics::CONTENT_TYPE)):
    /// first the depth of every queue the app knows (one Redis round trip per queue, at
    /// most once per [`DEPTH_CACHE_FOR`](crate::metrics::DEPTH_CACHE_FOR)) and the outbox
    /// backlog, then everything recorded.
    ///
    /// A queue whose counts cannot be read keeps its last figures; when none can be
    /// read because Redis is down, the error says so (a scrape then fails, which is what
    /// a scraper should see).
    pub async fn render(&self, app: &QueueApp) -> Result<String, Error> {
        let queues = app
            .known_queues()
            .iter()
            .map(|queue| app.queue::<serde_json::Value>(queue))
            .collect::<Result<Vec<_>, Error>>()?;
        let memory = app.inner.memory.as_ref().map(|watch| {
            let state = watch.state();
            MemoryReading {
                used: state.used,
                max: state.max,
                over: state.over,
            }
        });
        let sources = ScrapeSources {
            #[cfg(feature = "sqlx")]
            outbox: app.outbox().cloned(),
            memory,
        };
        self.render_from(&queues, sources).await
    }
}
