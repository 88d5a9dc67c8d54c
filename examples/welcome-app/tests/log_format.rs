//! The binary's logs as an operator reads them: plain text (no colour codes) when its
//! output is not a terminal, or one JSON object per line with `LOG_FORMAT=json`; a
//! job's line names its queue, job id, job name, attempt and trace, and nothing twice.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use queue_tests::http::{listener, post_json, request};
use queue_tests::{wait_until, TestRedis, SOON};

/// The binary, killed on drop, its stdout collected line by line.
struct Binary {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    addr: std::net::SocketAddr,
    _dir: std::path::PathBuf,
}

impl Drop for Binary {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self._dir);
    }
}

async fn start(redis: &TestRedis, log_format: Option<&str>) -> Binary {
    let dir = std::env::temp_dir().join(queue_core::testing::unique_prefix("wa-logs"));
    std::fs::create_dir_all(&dir).unwrap();
    let port = {
        let (free, addr) = listener().await;
        drop(free);
        addr.port()
    };
    let mut command = Command::new(env!("CARGO_BIN_EXE_welcome-app"));
    command
        .env_remove("NO_COLOR")
        .env_remove("RUST_LOG")
        .env("REDIS_URL", queue_tests::redis_url())
        .env("QUEUE_PREFIX", redis.prefix())
        .env(
            "DATABASE_URL",
            format!("sqlite://{}", dir.join("welcome.db").display()),
        )
        .env("QUEUE_KEYS_FILE", dir.join("welcome.keys"))
        .env("PORT", port.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    match log_format {
        Some(format) => command.env("LOG_FORMAT", format),
        None => command.env_remove("LOG_FORMAT"),
    };
    let mut child = command.spawn().expect("the example binary starts");
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    let stdout = child.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            sink.lock().expect("lines").push(line);
        }
    });
    let addr: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    let binary = Binary {
        child,
        lines,
        addr,
        _dir: dir,
    };
    wait_until(SOON, "the binary listens", || async {
        request(addr, "GET", "/jobs/email/none", &[], b"")
            .await
            .ok()
    })
    .await;
    binary
}

/// Signs a user up and waits for the welcome job's log line.
async fn signup_and_wait(binary: &Binary, email: &str) -> Vec<String> {
    let body = serde_json::json!({"email": email, "name": "Ada", "birthday": "1990-12-10"});
    let response = post_json(binary.addr, "/users", &[], &body).await;
    assert_eq!(
        response.status,
        202,
        "{:?}",
        String::from_utf8_lossy(&response.body)
    );
    wait_until(SOON, "the welcome job's log line", || async {
        let lines = binary.lines.lock().unwrap().clone();
        lines
            .iter()
            .any(|l| l.contains("welcome email handled"))
            .then_some(lines)
    })
    .await
}

#[tokio::test]
async fn piped_text_logs_have_no_colour_codes_and_a_jobs_line_names_it_once() {
    let redis = TestRedis::new("wa-logs-text");
    let binary = start(&redis, None).await;
    let lines = signup_and_wait(&binary, "ada-text@example.com").await;
    for line in &lines {
        assert!(!line.contains('\u{1b}'), "a colour code in {line:?}");
        assert!(
            !line.contains("request_id=\"\""),
            "an empty request id in {line:?}"
        );
    }
    // Quotes or none around a value: the subscriber's choice.
    let job = lines
        .iter()
        .find(|l| l.contains("welcome email handled"))
        .unwrap()
        .replace('"', "");
    for field in [
        "queue=email",
        "job_id=",
        "job_name=welcome",
        "attempt=1",
        "trace_id=",
    ] {
        assert!(job.contains(field), "no {field} in {job:?}");
    }
    for noise in ["messaging.", "bullmq.", "attempts.made"] {
        assert!(!job.contains(noise), "{noise} in {job:?}");
    }
}

#[tokio::test]
async fn log_format_json_writes_one_object_per_line() {
    let redis = TestRedis::new("wa-logs-json");
    let binary = start(&redis, Some("json")).await;
    let lines = signup_and_wait(&binary, "ada-json@example.com").await;
    let objects: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}")))
        .collect();
    let job = objects
        .iter()
        .find(|o| o["fields"]["message"] == "welcome email handled")
        .unwrap();
    let span = job["spans"]
        .as_array()
        .and_then(|spans| spans.iter().find(|s| s["name"] == "job"))
        .unwrap_or_else(|| panic!("no job span in {job}"));
    assert_eq!(span["queue"], "email", "{span}");
    assert_eq!(span["job_name"], "welcome", "{span}");
    assert_eq!(span["attempt"], 1, "{span}");
    assert!(
        span["job_id"].is_string() && span["trace_id"].is_string(),
        "{span}"
    );
    assert_eq!(job["level"], "INFO");
}

#[test]
fn an_unknown_log_format_is_refused_at_start() {
    let output = Command::new(env!("CARGO_BIN_EXE_welcome-app"))
        .env("LOG_FORMAT", "yaml")
        .output()
        .expect("the example binary runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("LOG_FORMAT=\"yaml\" is not a log format"),
        "{stderr}"
    );
}
