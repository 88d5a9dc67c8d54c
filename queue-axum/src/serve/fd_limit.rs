//! The process's limit of open files, which every connection, Redis socket, database
//! connection and file shares: a server that accepts connections until the limit is
//! reached leaves its handlers without a descriptor for anything else.

/// The soft limit of open files (`RLIMIT_NOFILE`), read from `/proc/self/limits`;
/// `None` where that file does not exist (not Linux) or does not say.
pub(super) fn open_files_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    parse(&limits)
}

fn parse(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    // "Max open files            1024                 524288               files"
    let soft = line
        .trim_start_matches("Max open files")
        .split_whitespace()
        .next()?;
    soft.parse().ok()
}

/// The connections a server holds at most by default under a limit of `files`: what
/// leaves 256 descriptors (and at least half) to the rest of the process.
pub(super) fn default_max_connections(files: Option<u64>) -> usize {
    match files {
        Some(files) => {
            let max = (files / 2).max(files.saturating_sub(256));
            usize::try_from(max).unwrap_or(usize::MAX).max(1)
        }
        // Not Linux: a common default limit is 1024, or 256 on macOS.
        None => 128,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_soft_limit_of_open_files() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \nMax cpu time              unlimited            unlimited            seconds   \nMax open files            1024                 524288               files     \n";
        assert_eq!(parse(limits), Some(1024));
        assert_eq!(
            parse("Max open files            unlimited  unlimited files\n"),
            None
        );
        assert_eq!(parse(""), None);
    }

    #[test]
    fn the_default_cap_leaves_descriptors_to_the_rest_of_the_process() {
        assert_eq!(default_max_connections(Some(256)), 128);
        assert_eq!(default_max_connections(Some(1024)), 768);
        assert_eq!(default_max_connections(Some(65_536)), 65_280);
        assert_eq!(default_max_connections(Some(1)), 1);
    }
}
