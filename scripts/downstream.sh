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
# Then the README's quick start, made into a project from the README alone (its Install
# section's dependencies and its code, by scripts/readme-quickstart.py), built the same
# way and walked through as its "Try it" block says: the same answers, the job done, the
# log lines the README promises, the dashboard's login a browser can use.
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
quick_pid=
prefix="downstream-$$-$RANDOM"
quick_prefix="quickstart-$$-$RANDOM"
redis_url=${REDIS_URL:-redis://127.0.0.1:6379}
cleanup() {
  local status=$?
  for pid in $app_pid $quick_pid; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  if [ "$status" -ne 0 ]; then
    for output in "$log" "$work/quickstart.log" "$work/quickstart.out"; do
      [ -s "$output" ] || continue
      echo "--- $output:" >&2
      cat "$output" >&2
    done
  fi
  for pattern in "$prefix:*" "$quick_prefix:*"; do
    redis-cli -u "$redis_url" --scan --pattern "$pattern" 2>/dev/null |
      xargs -r redis-cli -u "$redis_url" del >/dev/null 2>&1 || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "downstream: $*" >&2
  exit 1
}
# The address an app prints as `listening on <address>` to the file $2 (its pid $1),
# within 60 s; $3 names the app in the failure.
listening_address() {
  local pid=$1 output=$2 what=$3 addr= deadline=$((SECONDS + 60))
  while [ -z "$addr" ] && [ "$SECONDS" -lt "$deadline" ]; do
    kill -0 "$pid" 2>/dev/null || fail "$what exited before it listened"
    addr=$(sed -n 's/^listening on //p' "$output")
    [ -n "$addr" ] || sleep 0.1
  done
  [ -n "$addr" ] || fail "$what did not listen within 60 s"
  echo "$addr"
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
addr=$(listening_address "$app_pid" "$log" "the app")

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
grep -q 'greetings' <<<"$(http -H 'authorization: Bearer downstream-token' "http://$addr/admin/queues")" ||
  fail "the dashboard did not list the greetings queue to its operator"
echo "the dashboard refused a request without the token and listed the queue to its operator"

# The README's quick start, as a new user makes it from the README alone: its Install
# section's dependencies and its code (scripts/readme-quickstart.py swaps in the Redis
# URL, a key prefix of its own and a free port), then its "Try it" block: the answers
# shown there are the answers the app gives.
quick=$work/quickstart
mkdir -p "$quick/src" "$quick/.cargo"
cp "$work/app/.cargo/config.toml" "$quick/.cargo/"
shown=$(python3 scripts/readme-quickstart.py README.md "$quick" "$redis_url" "$quick_prefix" \
  "$(package_field queue-core version)")
echo "building the README's quick start from the packaged crates (warnings are errors)"
(cd "$quick" && RUSTFLAGS="-D warnings" cargo build --offline --quiet)
token=quickstart-operator-token
ADMIN_TOKEN=$token RUST_LOG=info NO_COLOR=1 "$CARGO_TARGET_DIR/debug/quickstart" \
  >"$work/quickstart.out" 2>"$work/quickstart.log" &
quick_pid=$!
addr=$(listening_address "$quick_pid" "$work/quickstart.out" "the quick start")
request=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["request"])' "$shown")
for attempt in first repeated; do
  http -i -o "$work/answer-$attempt" -H 'content-type: application/json' -d "$request" \
    "http://$addr/users" || fail "POST /users failed"
done
python3 - "$shown" "$work/answer-first" "$work/answer-repeated" <<'PY'
import json, sys
shown = json.loads(sys.argv[1])

def answer(path):
    head, _, body = open(path, encoding="utf-8").read().replace("\r\n", "\n").partition("\n\n")
    lines = head.split("\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return lines[0], {k.lower(): v for k, v in headers.items()}, json.loads(body)

status_line, headers, body = answer(sys.argv[2])
assert status_line == shown["status_line"], (status_line, shown)
assert headers.get("location") == shown["location"], (headers, shown)
assert body == shown["body"], (body, shown)
# "Sent again, the same request answers 202 with "duplicate":true and adds nothing."
status_line, headers, again = answer(sys.argv[3])
assert status_line == shown["status_line"], status_line
assert again == dict(shown["body"], duplicate=True), again
print(f"POST /users: {status_line}, location {headers['location']}, {json.dumps(body)}; "
      "the repeat answered duplicate")
PY
# `curl localhost:3000/jobs/email/welcome-42   # "state":"completed" after 5 s`
status_path=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["status_path"])' "$shown")
status=
deadline=$((SECONDS + 20))
while [ "$SECONDS" -lt "$deadline" ]; do
  status=$(http "http://$addr$status_path" || true)
  case "$status" in *'"state":"completed"'*) break ;; esac
  sleep 0.2
done
case "$status" in *'"state":"completed"'*) ;; *) fail "GET $status_path: $status, not completed" ;; esac
grep -q '^welcome, ' "$work/quickstart.out" || fail "the quick start's handler printed nothing"
# "The log shows the start-up, the processor registered for `email`..."
# (without colour codes, which a subscriber may write even to a file)
sed 's/\x1b\[[0-9;]*m//g' "$work/quickstart.log" | grep -q 'processor registered.*queue=email' ||
  fail "the quick start's log (stderr) does not show its processor registered"
# "...open http://localhost:3000/admin/queues in a browser: any user name, the token as
# the password": without it a browser is asked to log in (Basic), with it the queue shows.
http -o /dev/null -D "$work/refused" "http://$addr/admin/queues" || fail "GET /admin/queues failed"
head -1 "$work/refused" | grep -q ' 401' || fail "the dashboard answered $(head -1 "$work/refused") without a login"
grep -qi '^www-authenticate: Basic' "$work/refused" ||
  fail "the dashboard's 401 does not ask a browser to log in (no WWW-Authenticate: Basic)"
grep -q 'email' <<<"$(http -u "anyone:$token" "http://$addr/admin/queues")" ||
  fail "the dashboard did not list the email queue to a browser logged in with the token"
echo "the README's quick start: the answers of its Try it block, the job completed, its log, and its dashboard from a browser's login"
