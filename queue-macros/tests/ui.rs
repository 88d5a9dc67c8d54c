//! Compile errors are part of the product: one case per misuse, named after it.
//! The `.stderr` snapshots are pinned to one compiler; refresh them with
//! `TRYBUILD=overwrite cargo test -p queue-macros --test ui` when bumping it.

#[rustversion::attr(not(stable(1.95)), ignore = "UI snapshots are pinned to rustc 1.95")]
#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/ui/*/pass/*.rs");
    cases.compile_fail("tests/ui/*/fail/*.rs");
}
