#!/usr/bin/env bash
# Builds the library crates with the Rust version they claim (`rust-version` in the root
# Cargo.toml), using Debian's rustc-web/cargo-web of that version, installed if missing.
#
# The lock is made for that version: the library crates are copied to a temporary
# workspace and resolved with Cargo's MSRV-aware fallback (the newest version of each
# dependency whose own `rust-version` it meets), as a user on that toolchain would get.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

msrv=$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
[ -n "$msrv" ] || { echo "no rust-version in Cargo.toml" >&2; exit 1; }
old_cargo=/usr/bin/cargo
old_rustc=/usr/bin/rustc
if ! "$old_rustc" --version 2>/dev/null | grep -q "^rustc $msrv\."; then
  echo "installing Debian's rustc-web and cargo-web $msrv"
  apt_install apt-utils >/dev/null 2>&1 || true
  deb_version=$(apt-cache madison rustc-web | awk -v v="$msrv." '$3 ~ "^"v {print $3; exit}')
  [ -n "$deb_version" ] || { echo "Debian has no rustc-web $msrv" >&2; exit 1; }
  apt_install "rustc-web=$deb_version" "cargo-web=$deb_version" "libstd-rust-web-dev=$deb_version"
fi
"$old_rustc" --version

libs=(queue-engine queue-vocab queue-macros queue-core queue-axum)
work=$(mktemp -d /tmp/queue-msrv.XXXXXX)
trap 'rm -rf "$work"' EXIT
git ls-files -z Cargo.toml LICENSE-MIT "${libs[@]}" | xargs -0 cp --parents -P -t "$work"
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

echo "building ${libs[*]} (all features) with Rust $msrv"
(cd "$work" && RUSTC=$old_rustc RUSTDOC=/usr/bin/rustdoc "$old_cargo" build --locked --quiet \
  --target-dir "$root/target/msrv" --all-features $(printf -- '-p %s ' "${libs[@]}"))
echo "Rust $msrv builds the library crates"
