//! Our Lua scripts, registered beside upstream's (`ScriptRegistry::new` chains them):
//! every script of ours is in `ext/commands/`, named as upstream names its own
//! (`<command>-<number of keys>.lua`), a helper without a number.

use super::functions::{self, Library};

/// (name, number of keys, source) of each script of ours.
pub(crate) fn embedded() -> Vec<(&'static str, usize, &'static str)> {
    vec![
        // Locks taken back after an outage, and the jobs a token still holds
        // (PATCHES.md, changes 15 and 16).
        ("retakeLocks", 2, include_str!("commands/retakeLocks-2.lua")),
        (
            "findLockedJobs",
            1,
            include_str!("commands/findLockedJobs-1.lua"),
        ),
        // Fair groups (change 21), each with the helpers of `groupCommon.lua` in front.
        ("groupTake", 15, GROUP_TAKE),
        ("groupFinish", 18, group_finish()),
        ("groupAdd", 12, group_add()),
        (
            "groupControl",
            4,
            concat!(
                include_str!("commands/groupCommon.lua"),
                include_str!("commands/groupControl-4.lua")
            ),
        ),
        (
            "groupList",
            1,
            concat!(
                include_str!("commands/groupCommon.lua"),
                include_str!("commands/groupList-1.lua")
            ),
        ),
        (
            "groupRemoveJob",
            1,
            concat!(
                include_str!("commands/groupCommon.lua"),
                include_str!("commands/groupRemoveJob-1.lua")
            ),
        ),
        (
            "groupDrain",
            1,
            concat!(
                include_str!("commands/groupCommon.lua"),
                include_str!("commands/groupDrain-1.lua")
            ),
        ),
        (
            "groupMigrate",
            6,
            concat!(
                include_str!("commands/groupCommon.lua"),
                include_str!("commands/groupMigrate-6.lua")
            ),
        ),
        // An operator's bounded reads (change 28), with the helpers of `jobRows.lua`.
        (
            "getJobRows",
            1,
            concat!(
                include_str!("commands/jobRows.lua"),
                include_str!("commands/getJobRows-1.lua")
            ),
        ),
        (
            "getWaitingRows",
            2,
            concat!(
                include_str!("commands/jobRows.lua"),
                include_str!("commands/getWaitingRows-2.lua")
            ),
        ),
        (
            "scanJobRows",
            1,
            concat!(
                include_str!("commands/jobRows.lua"),
                include_str!("commands/scanJobRows-1.lua")
            ),
        ),
        (
            "scanWaitingRows",
            2,
            concat!(
                include_str!("commands/jobRows.lua"),
                include_str!("commands/scanWaitingRows-2.lua")
            ),
        ),
        (
            "getOldestWaiting",
            2,
            include_str!("commands/getOldestWaiting-2.lua"),
        ),
        // Batches (change 36): many jobs taken and completed per call.
        ("batchTake", 11, batch_take()),
        ("batchFinish", 8, batch_finish()),
    ]
}

/// `batchTake`: upstream's `moveToActive` up to where it takes its one job, then our
/// take of many (`batchTake.lua`): its checks are upstream's own.
fn batch_take() -> &'static str {
    static SCRIPT: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        cut_before(
            include_str!("../commands/moveToActive-11.lua"),
            "-- no job ID, try non-blocking move from wait to active\n",
            include_str!("commands/batchTake.lua"),
        )
    });
    &SCRIPT
}

/// `batchFinish`: upstream's `moveToFinished` helpers (its text before its body), then
/// our completion of many jobs (`batchFinish.lua`).
fn batch_finish() -> &'static str {
    static SCRIPT: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        cut_before(
            include_str!("../commands/moveToFinished-14.lua"),
            "local jobIdKey = KEYS[12]\n",
            include_str!("commands/batchFinish.lua"),
        )
    });
    &SCRIPT
}

/// Upstream's text up to `cut` (which must be there once), then ours. As with
/// [`compose`], a cut upstream's text no longer holds makes a script that fails
/// to load, which the tests catch.
fn cut_before(upstream: &str, cut: &str, ours: &str) -> String {
    match upstream
        .match_indices(cut)
        .map(|(at, _)| at)
        .collect::<Vec<_>>()[..]
    {
        [at] => format!("{}{ours}", &upstream[..at]),
        _ => format!("error(\"composed script: upstream text changed near {cut:?}\")\n"),
    }
}

/// `groupTake`: a grouped worker's fetch when it finished nothing (`groupTake-15.lua`).
const GROUP_TAKE: &str = concat!(
    include_str!("commands/groupCommon.lua"),
    include_str!("commands/groupFetch.lua"),
    include_str!("commands/groupTake-15.lua")
);

/// The scripts every grouped job runs, as one function library (change 35,
/// `functions.rs` says why): they run by `FCALL` where the server has functions.
pub(crate) fn function_library() -> &'static Library {
    static LIBRARY: std::sync::LazyLock<Library> = std::sync::LazyLock::new(|| {
        functions::library(&[
            ("groupAdd", group_add()),
            ("groupTake", GROUP_TAKE),
            ("groupFinish", group_finish()),
        ])
    });
    &LIBRARY
}

/// `groupFinish`: upstream's `moveToFinished`, its fetch of the next job made our take
/// by group (`groupFinish.lua` says why). Built once from upstream's text, so that a
/// new engine release's script is used as it is; the one line replaced must be there.
fn group_finish() -> &'static str {
    static SCRIPT: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        compose(
            &[
                include_str!("commands/groupCommon.lua"),
                include_str!("commands/groupFetch.lua"),
                include_str!("commands/groupFinish.lua"),
            ],
            include_str!("../commands/moveToFinished-14.lua"),
            &[(
                "local result = fetchNextJob(",
                "local result = groupFetchNext(",
            )],
        )
    });
    &SCRIPT
}

/// `groupAdd`: upstream's `addStandardJob`, the job put in its group instead of on
/// `wait` (`groupAdd.lua` says why); built as [`group_finish`] is.
fn group_add() -> &'static str {
    static SCRIPT: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        compose(
            &[
                include_str!("commands/groupCommon.lua"),
                include_str!("commands/groupAdd.lua"),
            ],
            include_str!("../commands/addStandardJob-9.lua"),
            &[
                // The queue's pause is the take's business: the job joins its group.
                (
                    "local isPausedOrMaxed = isQueuePausedOrMaxed(metaKey, activeKey)\n",
                    "",
                ),
                (
                    "addJobInTargetList(waitKey, KEYS[9], pushCmd, isPausedOrMaxed, jobId)\n\
                     -- Emit waiting event\n\
                     rcall(\"XADD\", eventsKey, \"MAXLEN\", \"~\", maxEvents, \"*\", \"event\", \"waiting\",\n      \
                     \"jobId\", jobId)",
                    "groupAdded(args[1], jobId, jobCounter, opts, rcall(\"XADD\", eventsKey, \"MAXLEN\", \"~\", \
                     maxEvents, \"*\", \"event\", \"waiting\", \"jobId\", jobId))",
                ),
            ],
        )
    });
    &SCRIPT
}

/// Our helpers, then upstream's script with each `(from, to)` replaced once. A `from`
/// upstream's text no longer holds is a bug of this crate, caught by its tests (every
/// script is loaded into Redis by them): the composed script then fails to load.
fn compose(ours: &[&str], upstream: &str, replacements: &[(&str, &str)]) -> String {
    let mut body = upstream.to_owned();
    for (from, to) in replacements {
        if body.matches(from).count() == 1 {
            body = body.replacen(from, to, 1);
        } else {
            body =
                format!("error(\"composed script: upstream text changed near {from:?}\")\n{body}");
        }
    }
    let mut script = ours.concat();
    script.push_str(&body);
    script
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_composed_scripts_replace_what_they_say() {
        let finish = group_finish();
        assert!(finish.contains("local result = groupFetchNext("));
        assert!(!finish.contains("local result = fetchNextJob("));
        assert!(!finish.contains("composed script"));
        let add = group_add();
        assert!(add.contains("groupAdded(args[1], jobId, jobCounter, opts, rcall("));
        assert!(!add.contains("addJobInTargetList(waitKey"));
        assert!(!add.contains("isQueuePausedOrMaxed(metaKey, activeKey)\n"));
        assert!(!add.contains("composed script"));
    }

    #[test]
    fn the_batch_scripts_keep_upstreams_checks_and_helpers() {
        let take = batch_take();
        assert!(take.contains("promoteDelayedJobs(delayedKey"));
        assert!(take.contains("if isPausedOrMaxed then return"));
        assert!(!take.contains("local jobId = rcall(\"RPOPLPUSH\", waitKey, activeKey)"));
        assert!(take.ends_with(include_str!("commands/batchTake.lua")));
        let finish = batch_finish();
        assert!(finish.contains("local function removeJobsByMaxCount("));
        assert!(!finish.contains("local jobIdKey = KEYS[12]"));
        assert!(!take.contains("composed script") && !finish.contains("composed script"));
    }

    #[test]
    fn every_grouped_script_is_a_function_of_the_library() {
        let names: Vec<&str> = function_library()
            .functions
            .iter()
            .map(|(script, _)| script.as_str())
            .collect();
        assert_eq!(names, ["groupAdd", "groupTake", "groupFinish"]);
    }
}
