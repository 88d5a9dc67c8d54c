//! Observability on, as a production app has it: the app's Prometheus [`Metrics`], and
//! a `tracing-opentelemetry` layer over the real OpenTelemetry SDK with its batch
//! processor. The exporter counts the spans and drops them, so the figure is the cost
//! inside the process, without a collector's network.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider, SpanData, SpanExporter};
use queue_core::metrics::Metrics;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::{Layer as _, SubscriberExt};

use crate::BenchResult;

/// Counts what it is given.
#[derive(Debug, Clone, Default)]
struct CountingExporter(Arc<AtomicU64>);

impl SpanExporter for CountingExporter {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        self.0.fetch_add(batch.len() as u64, Ordering::Relaxed);
        Ok(())
    }
}

/// The installed tracing pipeline and the metrics registry.
pub(super) struct Observed {
    provider: SdkTracerProvider,
    spans: Arc<AtomicU64>,
    pub(super) metrics: Metrics,
}

impl Observed {
    /// Installs the global subscriber (once per process: a probe runs one command).
    /// `sampled` is the share of new traces recorded (1.0: every attempt).
    pub(super) fn install(sampled: f64) -> BenchResult<Self> {
        let exporter = CountingExporter::default();
        let spans = exporter.0.clone();
        let sampler = if sampled >= 1.0 {
            Sampler::AlwaysOn
        } else {
            Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(sampled)))
        };
        let provider = SdkTracerProvider::builder()
            .with_sampler(sampler)
            .with_batch_exporter(exporter)
            .build();
        let layer = tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("queue-bench"))
            .with_filter(LevelFilter::INFO);
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer))?;
        Ok(Observed {
            provider,
            spans,
            metrics: Metrics::new(),
        })
    }

    /// Flushes the spans still batched and says how many were exported.
    pub(super) fn finish(self) -> BenchResult<u64> {
        self.provider.force_flush()?;
        self.provider.shutdown()?;
        Ok(self.spans.load(Ordering::Relaxed))
    }
}
