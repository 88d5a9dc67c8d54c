//! Our Lua scripts, registered beside upstream's (`ScriptRegistry::new` chains them):
//! every script of ours is in `ext/commands/`, named as upstream names its own
//! (`<command>-<number of keys>.lua`), a helper without a number.

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
        (
            "groupTake",
            15,
            concat!(
                include_str!("commands/groupCommon.lua"),
                include_str!("commands/groupTake-15.lua")
            ),
        ),
        (
            "groupRelease",
            5,
            concat!(
                include_str!("commands/groupCommon.lua"),
                include_str!("commands/groupRelease-5.lua")
            ),
        ),
        (
            "groupControl",
            5,
            concat!(
                include_str!("commands/groupCommon.lua"),
                include_str!("commands/groupControl-5.lua")
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
            "scanJobRows",
            1,
            concat!(
                include_str!("commands/jobRows.lua"),
                include_str!("commands/scanJobRows-1.lua")
            ),
        ),
        (
            "getOldestWaiting",
            1,
            include_str!("commands/getOldestWaiting-1.lua"),
        ),
    ]
}
