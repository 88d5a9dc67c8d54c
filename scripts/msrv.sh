#!/usr/bin/env bash
# The minimum Rust the library crates claim (`rust-version` in the root Cargo.toml), held
# to account as far as this machine allows.
#
# The library crates are copied to a temporary workspace and resolved as a user on that
# Rust would resolve them: with Cargo's MSRV-aware fallback, the newest version of each
# dependency whose own `rust-version` fits. Then
#   1. every resolved package must declare a `rust-version` no newer than ours (a
#      dependency that needs a newer Rust fails here, naming itself), and
#   2. the crates are built, all features on, against exactly that resolution (the older
#      dependency versions such a user gets, which our usual lock never builds with).
# Our own code's use of newer standard-library items is caught by clippy's
# `incompatible_msrv` lint, which the main clippy run applies against the same
# `rust-version`. Why 1.88 and not 1.85: `redis` 1.3 and later need 1.88 (the engine
# needs redis 1.7 or later). The build runs on the machine's toolchain: no 1.88 compiler
# can be installed here (rustup cannot download toolchains on our machines, and Debian
# offers rustc-web 1.85 and 1.96 only).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

msrv=$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
[ -n "$msrv" ] || { echo "no rust-version in Cargo.toml" >&2; exit 1; }
libs=("${library_crates[@]}")

work=$(mktemp -d /tmp/queue-msrv.XXXXXX)
trap 'rm -rf "$work"' EXIT
git ls-files -z Cargo.toml LICENSE-MIT "${libs[@]}" | xargs -0 cp --parents -L -t "$work"
python3 - "$work/Cargo.toml" "${libs[@]}" <<'PY'
import re, sys
path, libs = sys.argv[1], sys.argv[2:]
text = open(path).read()
members = "members = [" + ", ".join(f'"{lib}"' for lib in libs) + "]"
text = re.sub(r"^members = \[.*\]$", members, text, count=1, flags=re.M)
text = re.sub(r"^default-members = \[.*\]\n", "", text, count=1, flags=re.M)
open(path, "w").write(text)
PY
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

echo "building ${libs[*]} (all features) against that resolution"
(cd "$work" && cargo build --locked --quiet --target-dir "$root/target/msrv" --all-features \
  $(printf -- '-p %s ' "${libs[@]}"))
echo "the library crates build with the dependencies a Rust $msrv user resolves"
