//! What an operator reads about the Redis the app uses: version, memory against its
//! limit and eviction policy, clients, operations per second. One `INFO` per reading.

use crate::backend::Connection;
use crate::error::Error;

/// The Redis server as `INFO` describes it. Fields a provider hides are `None`.
///
/// ```no_run
/// # async fn demo(app: queue_core::QueueApp) -> queue_core::Result<()> {
/// let info = app.redis_info().await?;
/// if info.maxmemory_policy.as_deref() != Some("noeviction") {
///     println!("Redis may evict jobs: {:?}", info.maxmemory_policy);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedisInfo {
    /// `redis_version`.
    pub version: Option<String>,
    /// Memory in use, in bytes.
    pub used_memory: Option<u64>,
    /// The memory limit in bytes (`0`: none).
    pub maxmemory: Option<u64>,
    /// What Redis does at the limit (`noeviction` keeps every job).
    pub maxmemory_policy: Option<String>,
    /// Clients connected.
    pub connected_clients: Option<u64>,
    /// Commands per second, as Redis measures it now.
    pub ops_per_sec: Option<u64>,
    /// Seconds since the server started.
    pub uptime_seconds: Option<u64>,
}

impl RedisInfo {
    /// From an `INFO` answer.
    pub(crate) fn from_info(info: &str) -> Self {
        let field = |name: &str| {
            info.lines().find_map(|line| {
                line.trim()
                    .strip_prefix(name)
                    .and_then(|rest| rest.strip_prefix(':'))
                    .map(str::to_owned)
            })
        };
        let number = |name: &str| field(name).and_then(|v| v.parse::<u64>().ok());
        RedisInfo {
            version: field("redis_version"),
            used_memory: number("used_memory"),
            maxmemory: number("maxmemory"),
            maxmemory_policy: field("maxmemory_policy"),
            connected_clients: number("connected_clients"),
            ops_per_sec: number("instantaneous_ops_per_sec"),
            uptime_seconds: number("uptime_in_seconds"),
        }
    }
}

/// Reads the Redis server's version, memory, clients and load: one `INFO`, within
/// three seconds.
pub(crate) async fn read(conn: &Connection) -> Result<RedisInfo, Error> {
    let read = async {
        let info: String = conn.query(&mut redis::cmd("INFO")).await?;
        Ok(RedisInfo::from_info(&info))
    };
    tokio::time::timeout(std::time::Duration::from_secs(3), read)
        .await
        .unwrap_or(Err(Error::Timeout {
            what: "redis_info",
            after: std::time::Duration::from_secs(3),
        }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_fields_an_operator_needs() {
        let info = "# Server\r\nredis_version:7.0.15\r\nuptime_in_seconds:42\r\n# Clients\r\n\
                    connected_clients:7\r\n# Memory\r\nused_memory:1048576\r\n\
                    used_memory_human:1.00M\r\nmaxmemory:0\r\nmaxmemory_policy:noeviction\r\n\
                    # Stats\r\ninstantaneous_ops_per_sec:130\r\n";
        let read = RedisInfo::from_info(info);
        assert_eq!(read.version.as_deref(), Some("7.0.15"));
        assert_eq!(read.used_memory, Some(1_048_576));
        assert_eq!(read.maxmemory, Some(0));
        assert_eq!(read.maxmemory_policy.as_deref(), Some("noeviction"));
        assert_eq!(read.connected_clients, Some(7));
        assert_eq!(read.ops_per_sec, Some(130));
        assert_eq!(read.uptime_seconds, Some(42));
        assert_eq!(RedisInfo::from_info(""), RedisInfo::default());
    }
}
