//! The example's README, run: every `$` line of its `console` blocks is run against the
//! real `welcome-app` binary, in order, and each answer is compared with the one the
//! README shows. A route that answers another status, header, field or value fails here,
//! so the walk-through cannot drift from the service.
//!
//! How the README's lines are taken:
//! - `redis-server ...` starts the walk-through's private Redis (here: on a free port,
//!   standing in for the README's 6391); the next `redis-server` line starts it again.
//! - `redis-cli ... shutdown nosave` stops it (here: SIGKILL to its pid).
//! - `... cargo run -p welcome-app` starts the binary with the variables the line sets,
//!   on a free port, with its SQLite file in a scratch directory; the log lines shown
//!   below it must appear in that order.
//! - Every other line runs in `bash`, with `localhost:3000` and port 6391 pointed at this
//!   run's service and Redis.
//!
//! The log lines of each ```` ```text ```` block must appear in the service's log before
//! the walk runs the `$` line after the block (it waits up to 20 s), with their fields
//! (from the first `key=value` on, and a span's `{..}`) left out: a log line shown during
//! an outage is logged during it.
//!
//! An answer matches when its status line, the headers shown, and its JSON body match:
//! the same keys, the same values. Values that differ by nature from run to run match by
//! shape: hex ids and tokens (16 hex digits or more), numeric job ids, dates,
//! timestamps in milliseconds, and base64 (a sealed payload's nonce and ciphertext). A hex id the README shows is learnt with
//! the value this run got, and later commands use the real one: so an id that a later
//! answer repeats (the user id inside the job id, say) must be the same id. A GET is
//! asked again until it matches (the job may still be running), for 20 s at most.

mod support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use queue_tests::{free_port, PrivateRedis};
use serde_json::Value;
use support::ScratchDir;

/// How long a GET is asked again.
const PATIENCE: Duration = Duration::from_secs(20);
/// How long the start-up logs may take (a machine busy with the rest of the suite).
const START_PATIENCE: Duration = Duration::from_secs(60);

/// The port the README's service listens on, and its private Redis's.
const README_APP: &str = "localhost:3000";
const README_REDIS_PORT: &str = "6391";

/// One `$` line and the lines the README shows after it.
#[derive(Debug)]
struct Step {
    command: String,
    expected: Vec<String>,
}

/// The `$` lines of every ```` ```console ```` block, continuation lines joined.
fn console_steps(markdown: &str) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    let mut in_console = false;
    let mut continued = false;
    for line in markdown.lines() {
        let trimmed = line.trim_end();
        if !in_console {
            in_console = trimmed == "```console";
            continue;
        }
        if trimmed == "```" {
            in_console = false;
            continue;
        }
        if continued {
            let step = steps.last_mut().expect("a command to continue");
            continued = trimmed.ends_with('\\');
            step.command.push(' ');
            step.command
                .push_str(trimmed.trim_end_matches('\\').trim_start());
        } else if let Some(command) = trimmed.strip_prefix("$ ") {
            continued = command.ends_with('\\');
            steps.push(Step {
                command: command.trim_end_matches('\\').trim_end().to_owned(),
                expected: Vec::new(),
            });
        } else if let Some(step) = steps.last_mut() {
            step.expected.push(trimmed.to_owned());
        }
    }
    steps
}

/// Every ```` ```text ```` block (log lines the service prints), with the number of
/// `$` lines before it: the walk has its lines in the log before it goes on.
fn text_blocks(markdown: &str) -> Vec<(usize, Vec<String>)> {
    let mut blocks = Vec::new();
    let mut offset = 0;
    let mut current: Option<(usize, Vec<String>)> = None;
    for line in markdown.split_inclusive('\n') {
        let trimmed = line.trim_end();
        match current.as_mut() {
            None if trimmed == "```text" => {
                current = Some((console_steps(&markdown[..offset]).len(), Vec::new()));
            }
            Some(_) if trimmed == "```" => blocks.extend(current.take()),
            Some((_, lines)) if !trimmed.trim().is_empty() => lines.push(trimmed.to_owned()),
            _ => {}
        }
        offset += line.len();
    }
    blocks
}

/// A log line without its fields: no span fields in `{..}`, nothing from the first
/// `key=value` on.
fn without_fields(line: &str) -> String {
    let mut out = String::new();
    let mut depth = 0;
    for c in line.chars() {
        match c {
            '{' => depth += 1,
            '}' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    // Fields follow the message, and a value may hold spaces: the line ends at the first.
    out.split_whitespace()
        .take_while(|word| !word.contains('='))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A piece of a string that differs from run to run.
#[derive(Debug, Clone, PartialEq)]
enum Token {
    /// 16 hex digits or more: an id or a token, learnt.
    Hex(String),
    /// A string of digits alone: BullMQ's numeric job id.
    Number(String),
}

/// `text` with its run-dependent parts replaced by placeholders, and those parts.
fn shape(text: &str) -> (String, Vec<Token>) {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return ("<n>".to_owned(), vec![Token::Number(text.to_owned())]);
    }
    // A sealed payload's nonce and ciphertext: random, base64 (a letter or sign no hex
    // id has tells them apart).
    let base64 = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=');
    let beyond_hex = |b: u8| b.is_ascii_uppercase() || matches!(b, b'+' | b'/' | b'=');
    if text.len() >= 16 && text.bytes().all(base64) && text.bytes().any(beyond_hex) {
        return ("<base64>".to_owned(), Vec::new());
    }
    let bytes = text.as_bytes();
    let (mut out, mut tokens, mut i) = (String::new(), Vec::new(), 0);
    let is_date = |i: usize| {
        bytes.len() >= i + 10
            && bytes[i..i + 10].iter().enumerate().all(|(k, b)| match k {
                4 | 7 => *b == b'-',
                _ => b.is_ascii_digit(),
            })
    };
    while i < bytes.len() {
        if is_date(i) {
            out.push_str("<date>");
            i += 10;
            continue;
        }
        let hex_end = bytes[i..]
            .iter()
            .position(|b| !matches!(b, b'0'..=b'9' | b'a'..=b'f'))
            .map_or(bytes.len(), |n| i + n);
        if hex_end - i >= 16 {
            out.push_str("<hex>");
            tokens.push(Token::Hex(text[i..hex_end].to_owned()));
            i = hex_end;
            continue;
        }
        let c = text[i..].chars().next().expect("a char");
        out.push(c);
        i += c.len_utf8();
    }
    (out, tokens)
}

/// What the README's values stand for in this run: README text → this run's text.
#[derive(Debug, Clone, Default)]
struct Learnt(BTreeMap<String, String>);

impl Learnt {
    /// Learns a hex id; a numeric id matches by shape alone (replacing its digits in
    /// later commands would replace any digit).
    fn learn(&mut self, shown: &Token, got: &Token) -> Result<(), String> {
        let (Token::Hex(shown), Token::Hex(got)) = (shown, got) else {
            return Ok(());
        };
        match self.0.get(shown) {
            Some(before) if before != got => Err(format!(
                "the README's `{shown}` was `{before}` in this run, and is now `{got}`"
            )),
            _ => {
                self.0.insert(shown.clone(), got.clone());
                Ok(())
            }
        }
    }

    /// `text` with every learnt README value replaced by this run's, longest first.
    fn apply(&self, text: &str) -> String {
        let mut pairs: Vec<_> = self.0.iter().collect();
        pairs.sort_by_key(|(shown, _)| std::cmp::Reverse(shown.len()));
        pairs
            .into_iter()
            .fold(text.to_owned(), |text, (shown, got)| {
                text.replace(shown, got)
            })
    }
}

/// Compares a string as shown with one as answered, learning what differs by nature.
fn same_text(shown: &str, got: &str, learnt: &mut Learnt, at: &str) -> Result<(), String> {
    let ((shown_shape, shown_tokens), (got_shape, got_tokens)) = (shape(shown), shape(got));
    if shown_shape != got_shape {
        return Err(format!(
            "{at}: the README shows {shown:?}, the service answered {got:?}"
        ));
    }
    for (shown, got) in shown_tokens.iter().zip(&got_tokens) {
        learnt.learn(shown, got).map_err(|e| format!("{at}: {e}"))?;
    }
    Ok(())
}

/// Compares JSON as shown with JSON as answered.
fn same_json(shown: &Value, got: &Value, learnt: &mut Learnt, at: &str) -> Result<(), String> {
    match (shown, got) {
        (Value::Object(shown), Value::Object(got)) => {
            let keys = |m: &serde_json::Map<String, Value>| m.keys().cloned().collect::<Vec<_>>();
            if keys(shown) != keys(got) {
                return Err(format!(
                    "{at}: the README shows the fields {:?}, the service answered {:?}",
                    keys(shown),
                    keys(got)
                ));
            }
            for (key, value) in shown {
                same_json(value, &got[key], learnt, &format!("{at}.{key}"))?;
            }
            Ok(())
        }
        (Value::Array(shown), Value::Array(got)) => {
            if shown.len() != got.len() {
                return Err(format!(
                    "{at}: the README shows {} items, the service answered {}",
                    shown.len(),
                    got.len()
                ));
            }
            for (i, (shown, got)) in shown.iter().zip(got).enumerate() {
                same_json(shown, got, learnt, &format!("{at}[{i}]"))?;
            }
            Ok(())
        }
        (Value::String(shown), Value::String(got)) => same_text(shown, got, learnt, at),
        // Milliseconds since the epoch: a time, whatever it is.
        (Value::Number(shown), Value::Number(got))
            if shown.as_u64().is_some_and(|n| n >= 1_000_000_000_000)
                && got.as_u64().is_some_and(|n| n >= 1_000_000_000_000) =>
        {
            Ok(())
        }
        _ if shown == got => Ok(()),
        _ => Err(format!(
            "{at}: the README shows {shown}, the service answered {got}"
        )),
    }
}

/// An answer as the README shows it: the status line and headers of a `curl -i`, and
/// the body (JSON lines joined).
fn split_shown(lines: &[String]) -> (Vec<String>, Option<String>) {
    let mut head = Vec::new();
    let mut rest = lines;
    if lines.first().is_some_and(|l| l.starts_with("HTTP/")) {
        let blank = lines
            .iter()
            .position(|l| l.is_empty())
            .unwrap_or(lines.len());
        head = lines[..blank].to_vec();
        rest = &lines[(blank + 1).min(lines.len())..];
    }
    let body: Vec<&str> = rest
        .iter()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty())
        .collect();
    (head, (!body.is_empty()).then(|| body.join(" ")))
}

/// Compares one answer; `Ok` with what it taught.
fn check_answer(shown: &[String], stdout: &str, learnt: &Learnt) -> Result<Learnt, String> {
    let mut learnt = learnt.clone();
    let (head, body) = split_shown(shown);
    let (got_head, got_body) = match stdout.find("\r\n\r\n") {
        Some(end) if stdout.starts_with("HTTP/") => (&stdout[..end], &stdout[end + 4..]),
        _ => ("", stdout),
    };
    let got_lines: Vec<&str> = got_head.split("\r\n").collect();
    for (i, line) in head.iter().enumerate() {
        if i == 0 {
            if got_lines[0] != line {
                return Err(format!(
                    "the README shows {line:?}, the service answered {:?}",
                    got_lines[0]
                ));
            }
            continue;
        }
        let (name, value) = line
            .split_once(": ")
            .ok_or(format!("a header line: {line:?}"))?;
        let got = got_lines
            .iter()
            .filter_map(|l| l.split_once(": "))
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .ok_or(format!(
                "the README shows the header `{name}`, the answer has none"
            ))?;
        same_text(value, got.1, &mut learnt, name)?;
    }
    if let Some(body) = body.as_deref().filter(|b| b.starts_with("event:")) {
        same_events(body, got_body, &mut learnt)?;
    } else if let Some(body) = body {
        let shown: Value = serde_json::from_str(&body)
            .map_err(|e| format!("the README's answer is not JSON ({e}): {body}"))?;
        let got: Value = serde_json::from_str(got_body)
            .map_err(|e| format!("the service's answer is not JSON ({e}): {got_body}"))?;
        same_json(&shown, &got, &mut learnt, "answer")?;
    }
    Ok(learnt)
}

/// Server-sent events as `(event, data)` pairs (ids and comments left out). The README's
/// lines come joined by spaces (`split_shown`): each field starts a line again.
fn events_of(text: &str) -> Vec<(String, String)> {
    let text = text
        .replace(" event:", "\nevent:")
        .replace(" data:", "\ndata:")
        .replace(" id:", "\nid:");
    let mut events: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("event:") {
            events.push((name.trim().to_owned(), String::new()));
        } else if let (Some(data), Some(last)) = (line.strip_prefix("data:"), events.last_mut()) {
            last.1.push_str(data.trim());
        }
    }
    events
}

/// Compares a stream as shown (its events joined into one line by `split_shown`) with
/// the stream answered: the same events in order, their data as JSON.
fn same_events(shown: &str, got: &str, learnt: &mut Learnt) -> Result<(), String> {
    let (shown, got) = (events_of(shown), events_of(got));
    if shown.len() != got.len() {
        return Err(format!(
            "the README shows {} events, the stream sent {}: {got:?}",
            shown.len(),
            got.len()
        ));
    }
    for (i, ((shown_name, shown_data), (got_name, got_data))) in shown.iter().zip(&got).enumerate()
    {
        if shown_name != got_name {
            return Err(format!(
                "event {i}: the README shows `{shown_name}`, the stream sent `{got_name}`"
            ));
        }
        let shown: Value = serde_json::from_str(shown_data)
            .map_err(|e| format!("the README's event {i} is not JSON ({e}): {shown_data}"))?;
        let got: Value = serde_json::from_str(got_data)
            .map_err(|e| format!("the stream's event {i} is not JSON ({e}): {got_data}"))?;
        same_json(&shown, &got, learnt, &format!("event {i}"))?;
    }
    Ok(())
}

/// The running service, its log lines, and its private Redis.
struct Walk {
    dir: ScratchDir,
    app_port: u16,
    redis: Option<PrivateRedis>,
    app: Option<Child>,
    logs: Arc<Mutex<Vec<String>>>,
    learnt: Learnt,
}

impl Drop for Walk {
    fn drop(&mut self) {
        if let Some(mut app) = self.app.take() {
            let _ = app.kill();
            let _ = app.wait();
        }
        if let Some(logs) = self.logs.lock().ok().filter(|_| std::thread::panicking()) {
            eprintln!("welcome-app's log:\n{}", logs.join("\n"));
        }
    }
}

impl Walk {
    /// The README's addresses pointed at this run's.
    fn localise(&self, text: &str) -> String {
        let redis_port = self.redis.as_ref().map(|r| r.port().to_string());
        let text = text
            .replace(README_APP, &format!("127.0.0.1:{}", self.app_port))
            .replace("port=3000", &format!("port={}", self.app_port));
        match redis_port {
            Some(port) => text
                .replace(
                    &format!("127.0.0.1:{README_REDIS_PORT}"),
                    &format!("127.0.0.1:{port}"),
                )
                .replace(&format!("-p {README_REDIS_PORT}"), &format!("-p {port}")),
            None => text,
        }
    }

    fn run(&mut self, step: &Step) {
        let command = step.command.trim();
        if command.starts_with("redis-server") {
            match &mut self.redis {
                None => self.redis = Some(PrivateRedis::start()),
                Some(redis) => redis.restart(),
            }
        } else if command.starts_with("redis-cli") && command.contains("shutdown") {
            self.redis.as_mut().expect("a Redis to stop").kill();
        } else if command.contains("cargo run -p welcome-app") {
            self.start_app(command, &step.expected);
        } else {
            self.shell(command, &step.expected);
        }
    }

    /// Starts the binary with the line's variables; waits for the log lines shown.
    fn start_app(&mut self, command: &str, shown_logs: &[String]) {
        let mut app = Command::new(env!("CARGO_BIN_EXE_welcome-app"));
        // Only what the README's line sets: no TZ, ROLE or RUST_LOG of the machine's.
        app.env_clear();
        for word in command.split_whitespace().take_while(|w| *w != "cargo") {
            let (name, value) = word.split_once('=').expect("NAME=value before cargo");
            app.env(name, self.localise(value));
        }
        let mut child = app
            .env("PORT", self.app_port.to_string())
            .env("DATABASE_URL", self.dir.sqlite_url())
            // Its keyring file is made where the README's is: in the working directory.
            .current_dir(self.dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the welcome-app binary starts");
        for output in [
            Box::new(child.stdout.take().expect("stdout")) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().expect("stderr")),
        ] {
            let logs = Arc::clone(&self.logs);
            std::thread::spawn(move || {
                for line in BufReader::new(output).lines().map_while(Result::ok) {
                    logs.lock().expect("logs").push(line);
                }
            });
        }
        self.app = Some(child);
        let wanted: Vec<String> = shown_logs
            .iter()
            .filter(|l| !l.trim().is_empty())
            .map(|l| self.localise(l))
            .collect();
        let start = Instant::now();
        loop {
            let missing = {
                let logs = self.logs.lock().expect("logs");
                first_missing(&wanted, &logs)
            };
            let Some(missing) = missing else { return };
            if let Some(status) = self.app.as_mut().and_then(|a| a.try_wait().ok().flatten()) {
                panic!("welcome-app exited ({status}) before logging {missing:?}");
            }
            assert!(
                start.elapsed() < START_PATIENCE,
                "welcome-app did not log, in the README's order: {missing:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits (up to [`PATIENCE`]) until every one of `lines` is in the log, fields aside.
    fn wait_for_logs(&self, lines: &[String]) {
        let start = Instant::now();
        loop {
            let missing: Vec<String> = {
                let logs = self.logs.lock().expect("logs");
                let logs: Vec<String> = logs.iter().map(|l| without_fields(l)).collect();
                lines
                    .iter()
                    .map(|line| without_fields(line))
                    .filter(|line| !logs.iter().any(|l| l.ends_with(line.as_str())))
                    .collect()
            };
            if missing.is_empty() {
                return;
            }
            assert!(
                start.elapsed() < PATIENCE,
                "welcome-app never logged, fields aside: {missing:#?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Runs a shell line; compares its output with what the README shows.
    fn shell(&mut self, command: &str, shown: &[String]) {
        let command = self.localise(&self.learnt.apply(command));
        let asks_again =
            command.starts_with("curl") && !command.contains(" -X") && !command.contains(" -d");
        let start = Instant::now();
        loop {
            let output = Command::new("bash")
                .args(["-c", &command])
                // curl goes straight to 127.0.0.1, whatever proxy the machine has.
                .env("no_proxy", "*")
                .env("NO_PROXY", "*")
                .output()
                .expect("bash runs");
            let stdout = String::from_utf8_lossy(&output.stdout);
            let verdict = if output.status.success() {
                check_answer(shown, &stdout, &self.learnt)
            } else {
                Err(format!(
                    "exited with {}: {}",
                    output.status,
                    String::from_utf8_lossy(&output.stderr)
                ))
            };
            match verdict {
                Ok(learnt) => {
                    self.learnt = learnt;
                    return;
                }
                Err(e) if asks_again && start.elapsed() < PATIENCE => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => panic!("`{command}`\n{e}\nThe whole answer:\n{stdout}"),
            }
        }
    }
}

/// The first wanted log line not found after the ones before it, if any. A line is
/// found when a log line ends with it, whitespace collapsed.
fn first_missing(wanted: &[String], logs: &[String]) -> Option<String> {
    let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut from = 0;
    for line in wanted {
        let line = squash(line);
        match logs[from..].iter().position(|l| squash(l).ends_with(&line)) {
            Some(at) => from += at + 1,
            None => return Some(line),
        }
    }
    None
}

#[test]
fn the_readme_walk_through_answers_as_shown() {
    let readme = include_str!("../README.md");
    let steps = console_steps(readme);
    assert!(steps.len() > 10, "the README's console blocks: {steps:?}");
    let mut walk = Walk {
        dir: ScratchDir::new("wa-transcript"),
        app_port: free_port(),
        redis: None,
        app: None,
        logs: Arc::default(),
        learnt: Learnt::default(),
    };
    let blocks = text_blocks(readme);
    assert!(!blocks.is_empty(), "the README's text blocks");
    for at in 0..=steps.len() {
        for (_, lines) in blocks.iter().filter(|(before, _)| *before == at) {
            walk.wait_for_logs(lines);
        }
        if let Some(step) = steps.get(at) {
            walk.run(step);
        }
    }
}

#[test]
fn shapes_and_learning() {
    let (shape_of, tokens) = shape("welcome-52bbd56f852248d49f86fd3193bdf07c");
    assert_eq!(shape_of, "welcome-<hex>");
    assert_eq!(tokens.len(), 1);
    assert_eq!(shape("2026-11-24 to 2026-12-02").0, "<date> to <date>");
    assert_eq!(shape("17").0, "<n>");
    assert_eq!(shape("hIBnzfhOJiLoA7Spzj7OEqUo").0, "<base64>");
    assert_eq!(shape("0123456789abcdef").0, "<hex>");
    let mut learnt = Learnt::default();
    same_text("u-0123456789abcdef", "u-fedcba9876543210", &mut learnt, "x").unwrap();
    assert!(same_text("v-0123456789abcdef", "v-1111111111111111", &mut learnt, "x").is_err());
    assert_eq!(
        learnt.apply("/users/0123456789abcdef"),
        "/users/fedcba9876543210"
    );
    assert_eq!(
        without_fields("INFO job{queue=email id=7}: app::email: sent user_id=7 delivery=Sent"),
        "INFO job: app::email: sent"
    );
    assert_eq!(
        without_fields("WARN relay: cannot move jobs error=redis error: broken pipe"),
        "WARN relay: cannot move jobs"
    );
    let steps = console_steps("```console\n$ curl a \\\n    -d b\n{\"x\": 1}\n```\n");
    assert_eq!(steps[0].command, "curl a -d b");
    assert_eq!(steps[0].expected, ["{\"x\": 1}"]);
    let page = "```console\n$ a\n$ b\n```\n```text\nWARN x\n```\n```console\n$ c\n```\n```text\nINFO y\n```\n";
    assert_eq!(
        text_blocks(page),
        [
            (2, vec!["WARN x".to_owned()]),
            (3, vec!["INFO y".to_owned()])
        ]
    );
}
