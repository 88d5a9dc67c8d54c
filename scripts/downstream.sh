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
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

# The vendored crates and the build outlive the run, in places that do not move: Cargo
# fingerprints a registry crate by its path, so a fresh directory each run would rebuild
# every dependency. The vendored set is made again only when Cargo.lock changes.
registry=$root/target/downstream-registry
export CARGO_TARGET_DIR=$root/target/downstream

work=$(mktemp -d /tmp/queue-downstream.XXXXXX)
log=$work/app.log
app_pid=
prefix="downstream-$$-$RANDOM"
redis_url=${REDIS_URL:-redis://127.0.0.1:6379}
cleanup() {
  local status=$?
  if [ -n "$app_pid" ]; then
    kill "$app_pid" 2>/dev/null || true
    wait "$app_pid" 2>/dev/null || true
  fi
  if [ "$status" -ne 0 ] && [ -s "$log" ]; then
    echo "--- the app's output:" >&2
    cat "$log" >&2
  fi
  redis-cli -u "$redis_url" --scan --pattern "$prefix:*" 2>/dev/null |
    xargs -r redis-cli -u "$redis_url" del >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "downstream: $*" >&2
  exit 1
}

lock_sum=$(sha256sum Cargo.lock | cut -d' ' -f1)
if [ "$(cat "$registry/.lock-sum" 2>/dev/null)" != "$lock_sum" ]; then
  echo "vendoring the crates.io packages of Cargo.lock into $registry"
  rm -rf "$registry"
  cargo vendor --locked --quiet --versioned-dirs "$registry" >/dev/null
  echo "$lock_sum" >"$registry/.lock-sum"
fi
# Our packages, from their tarballs, each with the checksum Cargo checks.
for crate in "${library_crates[@]}"; do
  tarball=$(package_tarball "$crate")
  unpacked=$registry/$(basename "$tarball" .crate)
  rm -rf "$unpacked"
  tar -xzf "$tarball" -C "$registry"
  sum=$(sha256sum "$tarball" | cut -d' ' -f1)
  printf '{"files":{},"package":"%s"}' "$sum" >"$unpacked/.cargo-checksum.json"
done

cp -r tests/downstream "$work/app"
mkdir -p "$work/app/.cargo"
cat >"$work/app/.cargo/config.toml" <<TOML
[source.crates-io]
replace-with = "packaged"

[source.packaged]
directory = "$registry"
TOML

# The user's code is held to our own standards: formatted, and no warning.
rustfmt --edition 2021 --check "$work/app/src/main.rs"
echo "building tests/downstream from the packaged crates (warnings are errors)"
(cd "$work/app" && RUSTFLAGS="-D warnings" cargo build --offline --quiet)

# The lock a user would commit: our engine as a package under our name, never the
# upstream crate.
if grep -q '^name = "bullmq-official"$' "$work/app/Cargo.lock"; then
  fail "the project's Cargo.lock holds bullmq-official: something depends on the upstream engine"
fi
grep -A2 '^name = "queue-engine"$' "$work/app/Cargo.lock" | grep -q '^source = "registry+' ||
  fail "the project's Cargo.lock has no queue-engine from the registry"

echo "running it against $redis_url (prefix $prefix)"
REDIS_URL=$redis_url QUEUE_PREFIX=$prefix ADMIN_TOKEN=downstream-token \
  "$CARGO_TARGET_DIR/debug/greeter" >"$log" 2>&1 &
app_pid=$!
addr=
deadline=$((SECONDS + 60))
while [ -z "$addr" ] && [ "$SECONDS" -lt "$deadline" ]; do
  kill -0 "$app_pid" 2>/dev/null || fail "the app exited before it listened"
  addr=$(sed -n 's/^listening on //p' "$log")
  [ -n "$addr" ] || sleep 0.1
done
[ -n "$addr" ] || fail "the app did not listen within 60 s"

http() { curl -sS --noproxy '*' --max-time 5 "$@"; }
accepted=$(http -o "$work/accepted.json" -w '%{http_code} %header{location}' \
  -H 'content-type: application/json' -d '{"to":"ada"}' "http://$addr/greetings") ||
  fail "POST /greetings failed"
echo "POST /greetings -> $accepted $(cat "$work/accepted.json")"
read -r code location <<<"$accepted"
[ "$code" = 202 ] || fail "expected 202"

# The first attempt fails, the retry after the backoff succeeds.
status=
deadline=$((SECONDS + 30))
while [ "$SECONDS" -lt "$deadline" ]; do
  status=$(http "http://$addr$location" || true)
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
  fail "the failed listener did not run"
echo "the downstream app's job completed on its retry, and its failed listener ran"

# The dashboard, from its own package: refused without the token, the queue listed with it.
code=$(http -o /dev/null -w '%{http_code}' "http://$addr/admin/queues") || fail "GET /admin/queues failed"
[ "$code" = 401 ] || fail "the dashboard answered $code without the token, not 401"
http -H 'authorization: Bearer downstream-token' "http://$addr/admin/queues" | grep -q 'greetings' ||
  fail "the dashboard did not list the greetings queue to its operator"
echo "the dashboard refused a request without the token and listed the queue to its operator"
