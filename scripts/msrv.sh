#!/usr/bin/env bash
# The minimum Rust the library crates claim (`rust-version` in the root Cargo.toml), held
# to account as far as this machine allows, on the packages themselves.
#
# The tarballs of `cargo package` (target/package/*.crate) are unpacked into a temporary
# workspace (its `[patch]` joins them to each other, as crates.io would) and resolved as a
# user on that Rust would resolve them: with Cargo's MSRV-aware fallback, the newest
# version of each dependency whose own `rust-version` fits. Then
#   1. every resolved package must declare a `rust-version` no newer than ours (a
#      dependency that needs a newer Rust fails here, naming itself), and
#   2. every package is built from its tarball with all its features on, against exactly
#      that resolution (the older dependency versions such a user gets, which our usual
#      lock never builds with; and any file a feature needs, such as the outbox's
#      migrations, must be in the package).
# Our own code's use of newer standard-library items is caught by clippy's
# `incompatible_msrv` lint, which the main clippy run applies against the same
# `rust-version`. Why 1.88 and not 1.85: `redis` 1.3 and later need 1.88 (the engine
# needs redis 1.7 or later). The build runs on the machine's toolchain: no 1.88 compiler
# can be installed here (rustup cannot download toolchains on our machines, and Debian
# offers rustc-web 1.85 and 1.96 only).
#
# Usage: scripts/msrv.sh   (after `cargo package` of the library crates)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

msrv=$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
[ -n "$msrv" ] || { echo "no rust-version in Cargo.toml" >&2; exit 1; }
work=$(mktemp -d /tmp/queue-msrv.XXXXXX)
trap 'rm -rf "$work"' EXIT
members=()
patches=()
for crate in "${library_crates[@]}"; do
  tarball=$(package_tarball "$crate")
  unpacked=$(basename "$tarball" .crate)
  tar -xzf "$tarball" -C "$work"
  members+=("\"$unpacked\"")
  patches+=("$crate = { path = \"$unpacked\" }")
done
{
  echo '[workspace]'
  echo 'resolver = "2"'
  echo "members = [$(IFS=,; echo "${members[*]}")]"
  echo
  echo '[patch.crates-io]'
  printf '%s\n' "${patches[@]}"
} >"$work/Cargo.toml"
(cd "$work" && CARGO_RESOLVER_INCOMPATIBLE_RUST_VERSIONS=fallback cargo generate-lockfile --quiet)

echo "resolved for Rust $msrv: every dependency's own rust-version fits"
# What the build below compiles: this platform's packages (a Windows-only crate's
# rust-version is no concern of a Linux build).
host=$(rustc -vV | sed -n 's/^host: //p')
(cd "$work" && cargo metadata --format-version 1 --locked --filter-platform "$host") | python3 -c '
import json, sys
msrv = sys.argv[1]
def version(text):
    # "1.88" and "1.88.0" are the same version.
    return (tuple(int(part) for part in text.split(".")) + (0, 0))[:3]
too_new = sorted(
    "%s %s needs Rust %s" % (p["name"], p["version"], p["rust_version"])
    for p in json.load(sys.stdin)["packages"]
    if p["rust_version"] and version(p["rust_version"]) > version(msrv)
)
if too_new:
    sys.exit("these need a newer Rust than %s:\n  %s" % (msrv, "\n  ".join(too_new)))
' "$msrv"

echo "building ${library_crates[*]} from their packages (all features) against that resolution"
(cd "$work" && cargo build --locked --quiet --target-dir "$root/target/msrv" --all-features \
  $(printf -- '-p %s ' "${library_crates[@]}"))
echo "the packages build, all features on, with the dependencies a Rust $msrv user resolves"
