//! The benchmark's own `redis-server` on a free port, so that its figures are not
//! disturbed by anything else and it may be flushed between rounds.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::BenchResult;

/// A range of hash slots, `start..=end`, and its master's host and port.
pub(super) type SlotRange = (u16, u16, (String, u16));

/// A private Redis, killed on drop.
pub(super) struct BenchRedis {
    child: Child,
    port: u16,
    conn: redis::Connection,
}

pub(super) fn free_port() -> BenchResult<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl BenchRedis {
    pub(super) fn start() -> BenchResult<Self> {
        Self::start_on(free_port()?, &[])
    }

    /// A server on `port` with `extra` arguments (a cluster node's).
    pub(super) fn start_on(port: u16, extra: &[&str]) -> BenchResult<Self> {
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args(extra)
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start redis-server (is it installed?): {e}"))?;
        let url = format!("redis://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(10);
        let conn = loop {
            match redis::Client::open(url.as_str()).and_then(|c| c.get_connection()) {
                Ok(conn) => break conn,
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                Err(e) => return Err(format!("the bench Redis did not come up: {e}").into()),
            }
        };
        Ok(BenchRedis { child, port, conn })
    }

    pub(super) fn port(&self) -> u16 {
        self.port
    }

    pub(super) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The bench's own connection, for a suite that drives Redis itself.
    pub(super) fn connection(&mut self) -> &mut redis::Connection {
        &mut self.conn
    }

    /// Every round starts from an empty Redis.
    pub(super) fn flush(&mut self) -> BenchResult<()> {
        redis::cmd("FLUSHALL").query::<()>(&mut self.conn)?;
        Ok(())
    }

    pub(super) fn used_memory(&mut self) -> BenchResult<u64> {
        let info: String = redis::cmd("INFO").arg("memory").query(&mut self.conn)?;
        info.lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| "INFO memory has no used_memory".into())
    }

    /// One section of `INFO`.
    pub(super) fn info(&mut self, section: &str) -> BenchResult<String> {
        Ok(redis::cmd("INFO").arg(section).query(&mut self.conn)?)
    }

    /// Zeroes the command statistics.
    pub(super) fn reset_stats(&mut self) -> BenchResult<()> {
        redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query::<()>(&mut self.conn)?;
        Ok(())
    }

    /// `CONFIG GET name`: the setting's value now.
    pub(super) fn config_get(&mut self, name: &str) -> BenchResult<String> {
        let pair: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg(name)
            .query(&mut self.conn)?;
        pair.into_iter()
            .nth(1)
            .ok_or_else(|| format!("this Redis has no setting `{name}`").into())
    }

    /// `CONFIG SET name value`.
    pub(super) fn config_set(&mut self, name: &str, value: &str) -> BenchResult<()> {
        redis::cmd("CONFIG")
            .arg("SET")
            .arg(name)
            .arg(value)
            .query::<()>(&mut self.conn)?;
        Ok(())
    }

    /// CPU seconds Redis has used so far (user + system).
    pub(super) fn cpu_seconds(&mut self) -> BenchResult<f64> {
        let info: String = redis::cmd("INFO").arg("cpu").query(&mut self.conn)?;
        let read = |name: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        Ok(read("used_cpu_user:") + read("used_cpu_sys:"))
    }

    /// Up to `sample` jobs of `queue` in its list or sorted set `set` (`wait`,
    /// `completed`): the mean length of their `field` (`HSTRLEN`) and the mean memory of
    /// their hashes (`MEMORY USAGE`, every field counted). Zeroes when there are none.
    pub(super) fn job_bytes(
        &mut self,
        queue: &str,
        set: &str,
        field: &str,
        sample: usize,
    ) -> BenchResult<(f64, f64)> {
        let key = format!("bull:{queue}:{set}");
        let kind: String = redis::cmd("TYPE").arg(&key).query(&mut self.conn)?;
        let last = sample.saturating_sub(1);
        let range = if kind == "list" { "LRANGE" } else { "ZRANGE" };
        let ids: Vec<String> = redis::cmd(range)
            .arg(&key)
            .arg(0)
            .arg(last)
            .query(&mut self.conn)?;
        let (mut field_bytes, mut hash_bytes) = (0_u64, 0_u64);
        for id in &ids {
            let job = format!("bull:{queue}:{id}");
            field_bytes += redis::cmd("HSTRLEN")
                .arg(&job)
                .arg(field)
                .query::<u64>(&mut self.conn)?;
            hash_bytes += redis::cmd("MEMORY")
                .arg("USAGE")
                .arg(&job)
                .arg("SAMPLES")
                .arg(0)
                .query::<Option<u64>>(&mut self.conn)?
                .unwrap_or(0);
        }
        let count = ids.len().max(1) as f64;
        Ok((field_bytes as f64 / count, hash_bytes as f64 / count))
    }

    /// How many jobs `queue`'s sorted set `set` holds (`completed`, `failed`).
    pub(super) fn zcard(&mut self, queue: &str, set: &str) -> BenchResult<u64> {
        Ok(redis::cmd("ZCARD")
            .arg(format!("bull:{queue}:{set}"))
            .query(&mut self.conn)?)
    }

    pub(super) fn waiting(&mut self, queue: &str) -> BenchResult<u64> {
        Ok(redis::cmd("LLEN")
            .arg(format!("bull:{queue}:wait"))
            .query(&mut self.conn)?)
    }

    pub(super) fn version(&mut self) -> String {
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query(&mut self.conn)
            .unwrap_or_default();
        info.lines()
            .find_map(|l| l.strip_prefix("redis_version:"))
            .unwrap_or("?")
            .trim()
            .to_owned()
    }

    /// `CLUSTER SLOTS`: each range and the host and port of its master.
    pub(super) fn cluster_slots(&mut self) -> BenchResult<Vec<SlotRange>> {
        let ranges: Vec<Vec<redis::Value>> =
            redis::cmd("CLUSTER").arg("SLOTS").query(&mut self.conn)?;
        let mut out = Vec::new();
        for range in ranges {
            let mut fields = range.into_iter();
            let mut next = || fields.next().ok_or("a short CLUSTER SLOTS entry");
            let start: u16 = redis::from_redis_value(next()?)?;
            let end: u16 = redis::from_redis_value(next()?)?;
            let master: Vec<redis::Value> = redis::from_redis_value(next()?)?;
            let mut master = master.into_iter();
            let host: String = redis::from_redis_value(master.next().ok_or("no host")?)?;
            let port: u16 = redis::from_redis_value(master.next().ok_or("no port")?)?;
            out.push((start, end, (host, port)));
        }
        Ok(out)
    }

    /// Loads a trivial script and returns its SHA, for the EVALSHA floor.
    pub(super) fn load_trivial_script(&mut self) -> BenchResult<String> {
        Ok(redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg("return 1")
            .query(&mut self.conn)?)
    }
}

impl Drop for BenchRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
