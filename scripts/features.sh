#!/usr/bin/env bash
# Every library crate builds with no default features and with each feature alone (a
# loop in the manner of `cargo hack check --each-feature --no-dev-deps`; the loop needs
# nothing installed). Each `-p` build resolves that crate's features alone, so a feature
# that only compiles because another workspace member happens to turn on something else
# fails here.
set -euo pipefail
cd "$(dirname "$0")/.."

crates=(queue-engine queue-vocab queue-macros queue-core queue-axum)
features_of() {
  cargo metadata --format-version 1 --no-deps | python3 -c '
import json, sys
name = sys.argv[1]
package = next(p for p in json.load(sys.stdin)["packages"] if p["name"] == name)
print(" ".join(f for f in package["features"] if f != "default"))' "$1"
}

for crate in "${crates[@]}"; do
  echo "$crate: no default features"
  cargo check --quiet -p "$crate" --lib --no-default-features
  for feature in $(features_of "$crate"); do
    echo "$crate: --features $feature alone"
    cargo check --quiet -p "$crate" --lib --no-default-features --features "$feature"
  done
done
