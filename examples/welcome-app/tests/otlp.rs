//! The example binary exports its traces over OTLP when `OTEL_EXPORTER_OTLP_ENDPOINT`
//! is set: a sign-up's request, the welcome job's add and its attempt reach a collector
//! (a stand-in written here, decoding OTLP's protobuf) as one trace, the client's.

use std::process::Stdio;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;
use queue_tests::http::{listener, post_json, request};
use queue_tests::{wait_until, TestRedis, SOON};

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

/// A span as the collector received it.
#[derive(Debug, Clone)]
struct Received {
    service: String,
    name: String,
    trace: String,
    id: String,
    parent: String,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// An OTLP/HTTP trace receiver on a free loopback port.
async fn collector() -> (String, Arc<Mutex<Vec<Received>>>) {
    let received = Arc::new(Mutex::new(Vec::new()));
    let sink = received.clone();
    let router = axum::Router::new().route(
        "/v1/traces",
        post(move |body: Bytes| {
            let sink = sink.clone();
            async move {
                let export = ExportTraceServiceRequest::decode(body).expect("OTLP protobuf");
                for resource in export.resource_spans {
                    let service = resource
                        .resource
                        .iter()
                        .flat_map(|r| &r.attributes)
                        .find(|kv| kv.key == "service.name")
                        .and_then(|kv| kv.value.as_ref())
                        .map(|v| format!("{:?}", v.value))
                        .unwrap_or_default();
                    for span in resource.scope_spans.into_iter().flat_map(|s| s.spans) {
                        sink.lock().unwrap().push(Received {
                            service: service.clone(),
                            name: span.name,
                            trace: hex(&span.trace_id),
                            id: hex(&span.span_id),
                            parent: hex(&span.parent_span_id),
                        });
                    }
                }
                (
                    [("content-type", "application/x-protobuf")],
                    Vec::<u8>::new(),
                )
            }
        }),
    );
    let (listener, addr) = listener().await;
    tokio::spawn(async move { axum::serve(listener, router).await });
    (format!("http://{addr}"), received)
}

/// Stops the binary as a process manager does, and waits for it.
struct Binary(tokio::process::Child);

impl Drop for Binary {
    fn drop(&mut self) {
        let _ = self.0.start_kill();
    }
}

#[tokio::test]
async fn the_binary_exports_one_trace_from_request_to_attempt_over_otlp() {
    let redis = TestRedis::new("wa-otlp");
    let dir = std::env::temp_dir().join(queue_core::testing::unique_prefix("wa-otlp"));
    std::fs::create_dir_all(&dir).unwrap();
    let (endpoint, received) = collector().await;
    let port = {
        let (free, addr) = listener().await;
        drop(free);
        addr.port()
    };
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_welcome-app"))
        .env("REDIS_URL", queue_tests::redis_url())
        .env("QUEUE_PREFIX", redis.prefix())
        .env(
            "DATABASE_URL",
            format!("sqlite://{}", dir.join("welcome.db").display()),
        )
        .env("QUEUE_KEYS_FILE", dir.join("welcome.keys"))
        .env("PORT", port.to_string())
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
        .env("OTEL_SERVICE_NAME", "welcome-app-under-test")
        // Export every 100 ms rather than every 5 s.
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        // Quiet logs must not silence the traces.
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("the example binary starts");
    let mut binary = Binary(child);
    let addr: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    wait_until(SOON, "the binary listens", || async {
        request(addr, "GET", "/jobs/email/none", &[], b"")
            .await
            .ok()
    })
    .await;

    let traceparent = format!("00-{TRACE}-{CLIENT_SPAN}-01");
    let body =
        serde_json::json!({"email": "ada@example.com", "name": "Ada", "birthday": "1990-12-10"});
    let response = post_json(addr, "/users", &[("traceparent", &traceparent)], &body).await;
    assert_eq!(
        response.status,
        202,
        "{:?}",
        String::from_utf8_lossy(&response.body)
    );

    let spans = wait_until(SOON, "the welcome attempt's span exported", || async {
        let spans = received.lock().unwrap().clone();
        spans
            .iter()
            .any(|s| s.name == "process email" && s.trace == TRACE)
            .then_some(spans)
    })
    .await;
    let named = |name: &str| {
        spans
            .iter()
            .find(|s| s.name == name && s.trace == TRACE)
            .unwrap_or_else(|| panic!("no `{name}` in {spans:?}"))
    };
    let (req, add, attempt) = (
        named("request"),
        named("add email.welcome"),
        named("process email"),
    );
    assert_eq!(req.parent, CLIENT_SPAN);
    assert_eq!(add.parent, req.id);
    assert_eq!(attempt.parent, add.id);
    assert!(
        attempt.service.contains("welcome-app-under-test"),
        "{attempt:?}"
    );

    let pid = binary.0.id().expect("running");
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let status = tokio::time::timeout(SOON, binary.0.wait())
        .await
        .expect("the binary stops on SIGTERM")
        .unwrap();
    assert!(status.success(), "{status}");
    let _ = std::fs::remove_dir_all(&dir);
}
