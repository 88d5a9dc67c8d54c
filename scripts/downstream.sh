#!/usr/bin/env bash
# A user's project outside the workspace (tests/downstream), built from the packaged
# crates as crates.io would serve them, and driven over HTTP against the test Redis.
#
# The crates come from the tarballs of `cargo package` (target/package/*.crate), unpacked
# into a directory source that replaces crates.io for that project, beside every other
# crate it needs (vendored from our Cargo.lock). No path into the repository, no `[patch]`:
# what the project sees is what a user of the published crates would see, so a macro
# expansion that names something a user's crate cannot reach fails here.
#
# Usage: scripts/downstream.sh   (after `cargo package` of the library crates)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# A target dir of its own that outlives the run: a second run rebuilds only the app.
export CARGO_TARGET_DIR=$root/target/downstream

work=$(mktemp -d /tmp/queue-downstream.XXXXXX)
app_pid=
prefix="downstream-$$-$RANDOM"
redis_url=${REDIS_URL:-redis://127.0.0.1:6379}
cleanup() {
  [ -n "$app_pid" ] && kill "$app_pid" 2>/dev/null && wait "$app_pid" 2>/dev/null
  redis-cli -u "$redis_url" --scan --pattern "$prefix:*" 2>/dev/null |
    xargs -r redis-cli -u "$redis_url" del >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# The directory source: every crates.io package of our lock, then our own packages.
cargo vendor --locked --quiet --versioned-dirs "$work/registry" >/dev/null
version=$(cargo metadata --format-version 1 --no-deps |
  python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"]=="queue-core"))')
for crate in queue-engine queue-vocab queue-macros queue-core queue-axum; do
  tarball=target/package/$crate-$version.crate
  [ -f "$tarball" ] || { echo "missing $tarball: run cargo package first" >&2; exit 1; }
  tar -xzf "$tarball" -C "$work/registry"
  sum=$(sha256sum "$tarball" | cut -d' ' -f1)
  printf '{"files":{},"package":"%s"}' "$sum" >"$work/registry/$crate-$version/.cargo-checksum.json"
done

cp -r tests/downstream "$work/app"
mkdir -p "$work/app/.cargo"
cat >"$work/app/.cargo/config.toml" <<TOML
[source.crates-io]
replace-with = "packaged"

[source.packaged]
directory = "$work/registry"
TOML

echo "building tests/downstream from the packaged crates (warnings are errors)"
(cd "$work/app" && RUSTFLAGS="-D warnings" cargo build --offline --quiet)

# The lock a user would commit: our engine under our name, never the upstream crate.
if grep -q 'name = "bullmq-official"' "$work/app/Cargo.lock"; then
  echo "the downstream lock holds bullmq-official" >&2
  exit 1
fi
grep -q 'name = "queue-engine"' "$work/app/Cargo.lock"

echo "running it against $redis_url (prefix $prefix)"
log=$work/app.log
REDIS_URL=$redis_url QUEUE_PREFIX=$prefix "$CARGO_TARGET_DIR/debug/greeter" >"$log" 2>&1 &
app_pid=$!
addr=
for _ in $(seq 1 100); do
  addr=$(sed -n 's/^listening on //p' "$log")
  [ -n "$addr" ] && break
  kill -0 "$app_pid" 2>/dev/null || break
  sleep 0.1
done
[ -n "$addr" ] || { echo "the app did not start:" >&2; cat "$log" >&2; exit 1; }

accepted=$(curl -sS -o "$work/accepted.json" -w '%{http_code} %header{location}' \
  -H 'content-type: application/json' -d '{"to":"ada"}' "http://$addr/greetings")
echo "POST /greetings -> $accepted $(cat "$work/accepted.json")"
read -r code location <<<"$accepted"
[ "$code" = 202 ] || { echo "expected 202" >&2; cat "$log" >&2; exit 1; }

# Wait for the job to finish: the first attempt fails, the retry after the backoff succeeds.
status=
for _ in $(seq 1 150); do
  status=$(curl -sS "http://$addr$location")
  case "$status" in *'"state":"completed"'* | *'"state":"failed"'*) break ;; esac
  sleep 0.1
done
echo "GET $location -> $status"
python3 - "$status" <<'PY'
import json, sys
status = json.loads(sys.argv[1])
assert status["state"] == "completed", status
assert status["attemptsMade"] == 2, status
assert status["returnValue"] == "hello, ada", status
PY
grep -q 'failed listener: job .* attempt 1: the mail server is busy' "$log" ||
  { echo "the failed listener did not run:" >&2; cat "$log" >&2; exit 1; }
echo "the downstream app's job completed on its retry, and its failed listener ran"
