//! Logs, and OpenTelemetry traces exported over OTLP when `OTEL_EXPORTER_OTLP_ENDPOINT`
//! is set (nothing is exported otherwise).
//!
//! Logs are text, coloured only on a terminal, or one JSON object per line with
//! `LOG_FORMAT=json` (for a log collector). The exporter reads OpenTelemetry's standard
//! variables itself: `OTEL_EXPORTER_OTLP_ENDPOINT` (`/v1/traces` is appended),
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_EXPORTER_OTLP_HEADERS`, and
//! `OTEL_SERVICE_NAME` (default `welcome-app`).
//!
//! The queue's spans need no code here: with the `tracing-opentelemetry` layer in the
//! subscriber, each request, add and attempt is an OpenTelemetry span, one trace from
//! the HTTP request to the job's last attempt (`queue_core::trace`).

use std::io::IsTerminal;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Level;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::{Layer as _, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::EnvFilter;

/// The variable that turns the export on.
pub const OTLP_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";

/// The installed telemetry; [`Telemetry::shutdown`] sends the spans still buffered.
#[derive(Debug)]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

/// The variable that chooses the log format: `text` (the default) or `json`.
pub const LOG_FORMAT: &str = "LOG_FORMAT";

/// Why logs or traces could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TelemetryError {
    /// The OTLP exporter could not start (a bad endpoint, say).
    #[error("OpenTelemetry's OTLP exporter cannot start: {0}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
    /// `LOG_FORMAT` is neither `text` nor `json`.
    #[error("{LOG_FORMAT}={0:?} is not a log format; use `text` or `json`")]
    LogFormat(String),
}

impl Telemetry {
    /// Installs the global subscriber: logs filtered by `RUST_LOG` (default
    /// `info,sqlx=warn`) in the `LOG_FORMAT`, and the OTLP trace export when its
    /// endpoint is set.
    pub fn init() -> Result<Telemetry, TelemetryError> {
        let json = match std::env::var(LOG_FORMAT).as_deref() {
            Err(_) | Ok("" | "text") => false,
            Ok("json") => true,
            Ok(other) => return Err(TelemetryError::LogFormat(other.to_owned())),
        };
        let filter =
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn"));
        let provider = match std::env::var_os(OTLP_ENDPOINT) {
            Some(_) => Some(otlp_provider()?),
            None => None,
        };
        // Each layer has its own filter: quieter logs (`RUST_LOG=warn`) must not drop
        // the info-level spans a trace is made of.
        let otel = provider.as_ref().map(|provider| {
            tracing_opentelemetry::layer()
                .with_tracer(provider.tracer("welcome-app"))
                .with_filter(
                    Targets::new()
                        .with_default(Level::INFO)
                        .with_target("sqlx", Level::WARN),
                )
        });
        // Colour codes only for a person at a terminal: a file or a collector gets
        // plain text.
        let logs = if json {
            tracing_subscriber::fmt::layer()
                .json()
                .with_current_span(false)
                .with_filter(filter)
                .boxed()
        } else {
            tracing_subscriber::fmt::layer()
                .with_ansi(std::io::stdout().is_terminal())
                .with_filter(filter)
                .boxed()
        };
        tracing_subscriber::registry().with(logs).with(otel).init();
        match &provider {
            Some(_) => tracing::info!("exporting traces over OTLP ({OTLP_ENDPOINT} is set)"),
            None => tracing::info!("not exporting traces: set {OTLP_ENDPOINT} to export them"),
        }
        Ok(Telemetry { provider })
    }

    /// Sends the spans still buffered and stops the exporter.
    pub fn shutdown(self) {
        if let Some(provider) = self.provider {
            if let Err(e) = provider.shutdown() {
                eprintln!("welcome-app: the trace exporter did not shut down cleanly: {e}");
            }
        }
    }
}

/// OTLP over HTTP (protobuf), batched on the SDK's own thread.
fn otlp_provider() -> Result<SdkTracerProvider, TelemetryError> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()?;
    let service = std::env::var("OTEL_SERVICE_NAME").unwrap_or_else(|_| "welcome-app".to_owned());
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(service)
        .build();
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build())
}
