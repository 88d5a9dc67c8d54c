//! Which Redis the app talks to, checked once at start-up: BullMQ's scripts need
//! commands an older server does not have, and there they would fail job by job (the
//! first add with a deduplication id) instead of at start-up.

use std::fmt;

/// The oldest Redis the scripts the engine runs can work on: the add scripts use `LPOS`
/// (6.0.6) and `SET .. KEEPTTL` (6.0) for deduplication. Upstream recommends 6.2 or
/// newer; we test on 7.0.
pub(crate) const MINIMUM: ServerVersion = ServerVersion(6, 0, 6);

/// A Redis server's version, as `INFO server` reports it (`redis_version:7.0.15`).
/// Valkey and other Redis-compatible servers report the Redis version they implement
/// under the same key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct ServerVersion(pub(crate) u32, pub(crate) u32, pub(crate) u32);

impl ServerVersion {
    /// The `redis_version` line of an `INFO` answer, if there is one that parses.
    pub(crate) fn from_info(info: &str) -> Option<Self> {
        let version = info
            .lines()
            .find_map(|line| line.trim().strip_prefix("redis_version:"))?;
        let mut parts = version.trim().splitn(3, '.').map(|part| {
            // "7.2.4-rc1" and the like: the leading digits are the number.
            let digits = part.split(|c: char| !c.is_ascii_digit()).next()?;
            digits.parse::<u32>().ok()
        });
        let major = parts.next()??;
        let minor = parts.next().flatten().unwrap_or(0);
        let patch = parts.next().flatten().unwrap_or(0);
        Some(ServerVersion(major, minor, patch))
    }

    /// Whether the scripts run on this server.
    pub(crate) fn is_supported(self) -> bool {
        self >= MINIMUM
    }
}

impl fmt::Display for ServerVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_version_line_of_an_info_answer() {
        let info = "# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:00000000\r\n";
        assert_eq!(
            ServerVersion::from_info(info),
            Some(ServerVersion(7, 0, 15))
        );
        let valkey = "# Server\nredis_version:7.2.4\nserver_name:valkey\nvalkey_version:8.0.1\n";
        assert_eq!(
            ServerVersion::from_info(valkey),
            Some(ServerVersion(7, 2, 4))
        );
        assert_eq!(
            ServerVersion::from_info("redis_version:7.4.0-rc2\n"),
            Some(ServerVersion(7, 4, 0))
        );
        assert_eq!(
            ServerVersion::from_info("redis_version:8\n"),
            Some(ServerVersion(8, 0, 0))
        );
        assert_eq!(ServerVersion::from_info("# Server\nuptime:3\n"), None);
        assert_eq!(ServerVersion::from_info("redis_version:unknown\n"), None);
    }

    #[test]
    fn six_point_zero_point_six_is_the_oldest_supported() {
        assert!(ServerVersion(6, 0, 6).is_supported());
        assert!(ServerVersion(6, 0, 16).is_supported());
        assert!(ServerVersion(6, 2, 0).is_supported());
        assert!(ServerVersion(7, 0, 15).is_supported());
        assert!(ServerVersion(10, 0, 0).is_supported());
        assert!(!ServerVersion(6, 0, 5).is_supported());
        assert!(!ServerVersion(5, 0, 14).is_supported());
        assert_eq!(MINIMUM.to_string(), "6.0.6");
    }
}
