//! Aggregate processing of queues spread over a 3-master Redis Cluster, against the same
//! queues on one Redis, in alternating rounds, with each Redis's CPU.

use std::process::Command;
use std::time::Instant;

use super::redis::BenchRedis;
use super::stats::median;
use super::systems::System;
use super::Settings;
use crate::BenchResult;

/// Queues per run, one group (hash tag) per master.
const GROUPS: usize = 3;
/// Jobs each queue's worker runs at once.
const CONCURRENCY: usize = 10;

/// Three masters, no replicas, each a [`BenchRedis`] with cluster mode on.
struct BenchCluster {
    nodes: Vec<BenchRedis>,
    /// Where the nodes keep their cluster state; removed on drop.
    dir: std::path::PathBuf,
}

impl Drop for BenchCluster {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A free port whose cluster bus port (10000 higher) is free too, both below Linux's
/// ephemeral ports (32768 and up), where an outgoing connection can hold a port the bind
/// check does not see.
fn cluster_port() -> BenchResult<u16> {
    let free = |port: u16| std::net::TcpListener::bind(("127.0.0.1", port)).is_ok();
    (10000..22000)
        .step_by(37)
        .find(|p| free(*p) && free(p + 10000))
        .ok_or_else(|| "no free port pair for a cluster node".into())
}

impl BenchCluster {
    fn start() -> BenchResult<Self> {
        let dir = std::env::temp_dir().join(format!("queue-bench-cluster-{}", std::process::id()));
        let mut nodes = Vec::new();
        for _ in 0..GROUPS {
            let port = cluster_port()?;
            let node_dir = dir.join(port.to_string());
            std::fs::create_dir_all(&node_dir)?;
            let node_dir = node_dir.to_string_lossy().into_owned();
            nodes.push(BenchRedis::start_on(
                port,
                &["--cluster-enabled", "yes", "--dir", &node_dir],
            )?);
        }
        let mut create = Command::new("redis-cli");
        create.args(["--cluster", "create"]);
        for node in &nodes {
            create.arg(format!("127.0.0.1:{}", node.port()));
        }
        let status = create
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdout(std::process::Stdio::null())
            .status()?;
        if !status.success() {
            return Err("redis-cli --cluster create failed".into());
        }
        let cluster = BenchCluster { nodes, dir };
        let started = Instant::now();
        while !cluster.ok()? {
            if started.elapsed().as_secs() > 30 {
                return Err("the bench cluster did not reach state ok".into());
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        Ok(cluster)
    }

    fn ok(&self) -> BenchResult<bool> {
        for node in &self.nodes {
            let info = Command::new("redis-cli")
                .args(["-p", &node.port().to_string(), "cluster", "info"])
                .output()?;
            if !String::from_utf8_lossy(&info.stdout).contains("cluster_state:ok") {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn seeds(&self) -> String {
        let urls: Vec<String> = self.nodes.iter().map(BenchRedis::url).collect();
        urls.join(",")
    }

    /// The port of the master serving `slot` (from `CLUSTER SLOTS`).
    fn master_of(&mut self, slot: u16) -> BenchResult<u16> {
        self.nodes[0]
            .cluster_slots()?
            .into_iter()
            .find(|(start, end, _)| (*start..=*end).contains(&slot))
            .map(|(_, _, (_, port))| port)
            .ok_or_else(|| format!("no master serves slot {slot}").into())
    }

    /// One queue name per master: `{gN}q`, with tags picked so that each master has one.
    fn queues_one_per_master(&mut self) -> BenchResult<Vec<String>> {
        let mut picked: Vec<(u16, String)> = Vec::new();
        for i in 0..1000 {
            let queue = format!("{{g{i}}}q");
            let master = self.master_of(queue_core::connection::queue_slot("bench", &queue))?;
            if !picked.iter().any(|(m, _)| *m == master) {
                picked.push((master, queue));
            }
            if picked.len() == GROUPS {
                return Ok(picked.into_iter().map(|(_, q)| q).collect());
            }
        }
        Err("could not place one queue on each master".into())
    }
}

/// CPU seconds each Redis used during `run`, and its wall time.
fn timed_cpu(
    nodes: &mut [&mut BenchRedis],
    run: impl FnOnce() -> BenchResult<f64>,
) -> BenchResult<(f64, Vec<f64>)> {
    let before = nodes
        .iter_mut()
        .map(|n| n.cpu_seconds())
        .collect::<BenchResult<Vec<_>>>()?;
    let ms = run()?;
    let after = nodes
        .iter_mut()
        .map(|n| n.cpu_seconds())
        .collect::<BenchResult<Vec<_>>>()?;
    Ok((ms, before.iter().zip(after).map(|(b, a)| a - b).collect()))
}

pub(super) fn measure(single: &mut BenchRedis, settings: Settings) -> BenchResult<String> {
    let mut cluster = BenchCluster::start()?;
    let queues = cluster.queues_one_per_master()?.join(",");
    let n = settings.jobs;
    let total = n * GROUPS as u64;
    let (mut single_rates, mut cluster_rates) = (Vec::new(), Vec::new());
    let (mut single_cpu, mut cluster_cpu) = (Vec::new(), vec![Vec::new(); GROUPS]);
    let run = |target: String| -> BenchResult<f64> {
        let args = [
            "spread",
            &target,
            &queues,
            &CONCURRENCY.to_string(),
            &n.to_string(),
        ];
        let result = System::Ours.run("", &args)?;
        result["ms"].as_f64().ok_or_else(|| "no `ms`".into())
    };
    for round in 0..settings.rounds {
        // Alternate which setup goes first.
        for on_cluster in [round % 2 == 1, round % 2 == 0] {
            if on_cluster {
                for node in &mut cluster.nodes {
                    node.flush()?;
                }
                let target = format!("cluster:{}", cluster.seeds());
                let mut nodes: Vec<&mut BenchRedis> = cluster.nodes.iter_mut().collect();
                let (ms, cpu) = timed_cpu(&mut nodes, || run(target))?;
                cluster_rates.push(total as f64 / ms * 1000.0);
                for (i, seconds) in cpu.into_iter().enumerate() {
                    cluster_cpu[i].push(seconds / ms * 1000.0 * 100.0);
                }
            } else {
                single.flush()?;
                let target = format!("single:{}", single.url());
                let (ms, cpu) = timed_cpu(&mut [&mut *single], || run(target))?;
                single_rates.push(total as f64 / ms * 1000.0);
                single_cpu.push(cpu[0] / ms * 1000.0 * 100.0);
            }
        }
    }
    eprintln!("cluster: single {single_rates:?}, cluster {cluster_rates:?}");
    let (one, three) = (median(&single_rates), median(&cluster_rates));
    let per_node: Vec<String> = cluster_cpu
        .iter()
        .map(|c| format!("{:.0} %", median(c)))
        .collect();
    Ok(format!(
        "### Queues spread over a 3-master Redis Cluster (jobs/s, median of the rounds)\n\n\
         {GROUPS} queues, one hash tag per master, {n} no-op jobs each, concurrency {CONCURRENCY} per \
         queue, one worker process; the same queues on one Redis. Redis CPU is each server's \
         user + system time over the run's wall time.\n\n\
         | setup | jobs/s | Redis CPU | ratio |\n|---|---|---|---|\n\
         | one Redis | {one:.0} | {:.0} % | 1.00 |\n\
         | 3-master cluster | {three:.0} | {} | {:.2} |\n\n",
        median(&single_cpu),
        per_node.join(" / "),
        three / one,
    ))
}
