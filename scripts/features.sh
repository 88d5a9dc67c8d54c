#!/usr/bin/env bash
# Every library crate builds with no default features and with each feature alone (a
# loop in the manner of `cargo hack check --each-feature --no-dev-deps`; the loop needs
# nothing installed). Each `-p` build resolves that crate's features alone, so a feature
# that only compiles because another workspace member happens to turn on something else
# fails here.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

for crate in "${library_crates[@]}"; do
  # An assignment of its own: a failing lookup stops the script here, where inside the
  # `for` list it would leave an empty list and a check that checked nothing.
  features=$(package_field "$crate" features)
  if [ -z "$features" ]; then
    # No feature at all: its one build is the one its own tests made.
    echo "$crate: no features"
    continue
  fi
  echo "$crate: no default features"
  cargo check --quiet -p "$crate" --lib --no-default-features
  for feature in $features; do
    echo "$crate: --features $feature alone"
    cargo check --quiet -p "$crate" --lib --no-default-features --features "$feature"
  done
done
