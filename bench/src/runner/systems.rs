//! The systems under test, each run as a child process that answers one command with one
//! JSON line (or, for `serve`, listens until killed).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use crate::BenchResult;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum System {
    /// This framework.
    Ours,
    /// The engine it wraps, used directly.
    Raw,
    /// Node BullMQ 6, the newest (`bullmq` in bench/node, pinned by its lock file).
    Node,
    /// Node BullMQ 5 (`bullmq5` in bench/node), kept in the enqueue and throughput tables.
    Node5,
    /// NestJS 11 with `@nestjs/bullmq` over Node BullMQ 6 (bench/nestjs): `serve` only.
    Nest,
}

impl System {
    /// The three every suite compares: ours, the engine under it, and Node BullMQ's newest.
    pub(super) const ALL: [System; 3] = [System::Ours, System::Raw, System::Node];

    /// [`System::ALL`] and Node BullMQ 5, where a row of it costs little.
    pub(super) const WITH_NODE5: [System; 4] =
        [System::Ours, System::Raw, System::Node, System::Node5];

    pub(super) fn label(self) -> &'static str {
        match self {
            System::Ours => "ours",
            System::Raw => "raw engine",
            System::Node => "Node BullMQ 6",
            System::Node5 => "Node BullMQ 5",
            System::Nest => "NestJS + @nestjs/bullmq",
        }
    }

    fn command(self, redis_url: &str, args: &[&str]) -> BenchResult<Command> {
        let mut command = match self {
            System::Node | System::Node5 => {
                let mut node = node_script("bench.mjs");
                node.args(args);
                node.env("BULLMQ", if self == System::Node5 { "5" } else { "6" });
                node
            }
            System::Nest => {
                // `serve <port>`: the app takes the port alone.
                let Some((&"serve", rest)) = args.split_first() else {
                    return Err(format!("the NestJS app only serves, not {args:?}").into());
                };
                let mut node = Command::new("node");
                node.arg(bench_dir().join("nestjs").join("main.js"))
                    .args(rest);
                node
            }
            System::Ours | System::Raw => {
                let mut us = Command::new(std::env::current_exe()?);
                let (command, rest) = args.split_first().ok_or("an empty command")?;
                let system = if self == System::Ours { "ours" } else { "raw" };
                us.arg(command).arg(system).args(rest);
                us
            }
        };
        command.env("REDIS_URL", redis_url).env("RUST_LOG", "off");
        Ok(command)
    }

    /// Runs `args` to the end and parses its one line of JSON.
    pub(super) fn run(self, redis_url: &str, args: &[&str]) -> BenchResult<serde_json::Value> {
        self.run_env(redis_url, args, &[])
    }

    /// [`System::run`] with more environment (the CPU handler's calibrated work).
    pub(super) fn run_env(
        self,
        redis_url: &str,
        args: &[&str],
        env: &[(&str, String)],
    ) -> BenchResult<serde_json::Value> {
        let mut command = self.command(redis_url, args)?;
        command.envs(env.iter().map(|(name, value)| (name, value)));
        run_to_json(command, &format!("{} {args:?}", self.label()))
    }

    /// Starts a long-running command (a server); the caller kills it.
    pub(super) fn spawn(self, redis_url: &str, args: &[&str]) -> BenchResult<Child> {
        Ok(self
            .command(redis_url, args)?
            .stdout(Stdio::null())
            .spawn()?)
    }
}

/// The bench crate's folder, which holds the Node peers.
fn bench_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `node bench/node/<script>`.
pub(super) fn node_script(script: &str) -> Command {
    let mut node = Command::new("node");
    node.arg(bench_dir().join("node").join(script));
    node
}

/// Runs `command` to the end and parses the last line it printed as JSON.
pub(super) fn run_to_json(mut command: Command, what: &str) -> BenchResult<serde_json::Value> {
    let output = command.stderr(Stdio::inherit()).output()?;
    if !output.status.success() {
        return Err(format!("{what} failed: {}", output.status).into());
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .last()
        .ok_or_else(|| format!("{what} printed nothing"))?;
    Ok(serde_json::from_str(line)?)
}
