#!/usr/bin/env bash
# Runs the whole suite on a fresh machine: brings up what the tests need (a Redis on
# 127.0.0.1:6379, a PostgreSQL on 127.0.0.1:5432, openssl for the TLS test, the Node
# and Python test peers where present), then fmt, the floors (no import circle, nothing
# up a floor), clippy, docs, the guide, every test of the workspace (each library
# crate's on its own), the core of the suite once more on a private Redis Cluster
# (scripts/redis-cluster.sh), and the packaging: the crates as tarballs, a user's project
# built from them (scripts/downstream.sh), each feature alone (scripts/features.sh) and
# the packages' build on the MSRV's resolution (scripts/msrv.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step says how long the one before it took, and the run its total.
step_started=$SECONDS
say() {
  if [ -n "${step_name:-}" ]; then
    printf '    (%s: %d s)\n' "$step_name" $((SECONDS - step_started))
  fi
  step_name=$*
  step_started=$SECONDS
  printf '\n==> %s\n' "$*"
}

# shellcheck source=scripts/lib.sh
. scripts/lib.sh

redis_answers() {
  timeout 2 bash -c 'exec 3<>/dev/tcp/127.0.0.1/6379 && printf "PING\r\n" >&3 && head -c 5 <&3' 2>/dev/null | grep -q PONG
}

say "Redis on 127.0.0.1:6379"
if redis_answers; then
  echo "already answering"
else
  command -v redis-server >/dev/null || apt_install redis-server
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
    --logfile /tmp/queue-tests-redis.log
  for _ in $(seq 1 50); do redis_answers && break; sleep 0.1; done
  redis_answers || { echo "redis-server did not start; see /tmp/queue-tests-redis.log" >&2; exit 1; }
  echo "started"
fi
say "PostgreSQL on 127.0.0.1:5432 (trust auth; the tests make and drop their own databases)"
pg_answers() { timeout 2 bash -c 'exec 3<>/dev/tcp/127.0.0.1/5432' 2>/dev/null; }
if pg_answers; then
  echo "already answering"
else
  command -v pg_ctlcluster >/dev/null || apt_install postgresql
  version=$(ls /etc/postgresql | sort -V | tail -1)
  hba=/etc/postgresql/$version/main/pg_hba.conf
  # A throw-away test server: every local connection is trusted.
  printf 'local all all trust\nhost all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\n' |
    as_root tee "$hba" >/dev/null
  as_root pg_ctlcluster "$version" main start || as_root pg_ctlcluster "$version" main restart
  for _ in $(seq 1 50); do pg_answers && break; sleep 0.2; done
  pg_answers || { echo "PostgreSQL did not start" >&2; exit 1; }
  echo "started"
fi

# The fault tests start private redis-servers (plain and TLS) on free ports.
command -v redis-server >/dev/null || apt_install redis-server
command -v openssl >/dev/null || apt_install openssl
# curl: the example's transcript test and scripts/downstream.sh speak HTTP with it;
# redis-cli (with redis-server): downstream.sh removes its keys.
command -v curl >/dev/null || apt_install curl
# python3: the packaging scripts read `cargo metadata` with it.
command -v python3 >/dev/null || apt_install python3

# The dashboard's browser test drives Debian's chromium (tests/tests/dashboard/browser.rs).
if [ ! -x "${CHROMIUM:-/usr/bin/chromium}" ]; then
  say "chromium (the dashboard's browser test)"
  apt_install chromium
fi

if [ -f tests/node/package-lock.json ]; then
  say "Node test peers (bullmq 5.x and, in the bullmq6 workspace, 6.x; tests/node)"
  command -v npm >/dev/null || apt_install nodejs npm
  (cd tests/node && npm ci --no-audit --no-fund --loglevel=error)
fi

# The Python peer (tests/tests/interop/python.rs): `bullmq` from PyPI in a venv under
# target/, made only when it is missing or was made from other pins (about 6 s, most of
# it pip downloading eleven packages; nothing when it is there).
if [ -f tests/python/requirements.txt ]; then
  say "Python test peer (bullmq 3.x, tests/python; a venv at target/python-peer)"
  venv=target/python-peer
  if cmp -s tests/python/requirements.txt "$venv/requirements.txt"; then
    echo "already installed"
  else
    python3 -m venv --help >/dev/null 2>&1 && python3 -c 'import ensurepip' 2>/dev/null ||
      apt_install python3-venv
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check --requirement tests/python/requirements.txt
    cp tests/python/requirements.txt "$venv/requirements.txt"
  fi
fi

say "cargo fmt --check"
cargo fmt --all -- --check

# The floors of queue-core, queue-axum and queue-dashboard: no import circle, nothing
# up a floor, as docs/architecture.md draws them (tools/layer-check; a few seconds). And
# the dashboard's markup in its views only: its loaders and actions hand data on.
say "the floors (tools/layer-check)"
cargo run --quiet -p layer-check
if grep -rlE 'maud::|html! *\{' queue-dashboard/src | grep -v '^queue-dashboard/src/view/'; then
    echo "markup outside queue-dashboard/src/view/ (above); templates are the views'" >&2
    exit 1
fi

say "cargo clippy -D warnings"
cargo clippy --workspace --all-targets -- -D warnings

say "cargo doc -D warnings"
RUSTDOCFLAGS=-Dwarnings cargo doc --workspace --no-deps --quiet

say "the guide (scripts/docs.sh)"
bash scripts/docs.sh

# The library crates' tests run once each, on their own: `-p` resolves that crate's
# features alone, so a test (or doctest) that only builds because another member turns a
# feature on fails here. The rest of the workspace (end-to-end tests, the example, the
# benchmark) runs together.
say "cargo test: the end-to-end tests and the example"
cargo test --workspace $(printf -- '--exclude %s ' "${library_crates[@]}")
for lib in "${library_crates[@]}"; do
  say "cargo test -p $lib --all-features (on its own)"
  if [ "$lib" = queue-engine ]; then
    # Upstream's tests flush Redis's script cache (SCRIPT FLUSH), and two of them race
    # each other doing so: they get a private Redis, stopped by pid however they end,
    # and one thread.
    (
      engine_redis=$(mktemp -d /tmp/queue-tests-engine.XXXXXX)
      trap 'stop_redis_in "$engine_redis"' EXIT
      port=$(free_port)
      redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --daemonize yes \
        --dir "$engine_redis" --pidfile "$engine_redis/redis.pid" --logfile "$engine_redis/redis.log"
      for _ in $(seq 1 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
      REDIS_URL=redis://127.0.0.1:$port cargo test -p "$lib" --all-features -- --test-threads=1
    )
  else
    cargo test -p "$lib" --all-features
  fi
done

# The core of the suite again, on a Redis Cluster: the same tests, with every app on
# REDIS_CLUSTER_NODES and every test prefix a hash tag (tests/src/lib.rs).
say "the core of the suite on a private Redis Cluster (3 masters, 3 replicas)"
cluster_dir=$(mktemp -d /tmp/queue-tests-cluster.XXXXXX)
trap 'scripts/redis-cluster.sh stop "$cluster_dir"' EXIT
nodes=$(scripts/redis-cluster.sh start "$cluster_dir")
echo "$nodes"
# An area's binary with the filters of its modules verified on a cluster (libtest
# filters are substrings, OR'ed; no module name is a suffix of a sibling's).
core=(
  "queue producer:: options:: bad_input::"
  "worker handler:: attempt:: retries:: lifecycle:: stalled::"
  "events queue_events:: listeners::"
  "flow"
  "http layer:: serve::"
  "dashboard queues::"
  "store outbox::"
  "app metrics:: testing_kit::"
  "contract macros:: declared::"
  "interop node::"
  "group producers::"
)
for entry in "${core[@]}"; do
  read -r area filters <<<"$entry"
  # shellcheck disable=SC2086 # the filters are words
  REDIS_CLUSTER_NODES=$nodes cargo test -p queue-tests --test "$area" -- $filters
done
REDIS_CLUSTER_NODES=$nodes cargo test -p welcome-app --test service --test long_work
# The engine's own cluster tests, which pass without running when no cluster is given.
REDIS_CLUSTER_NODES=$nodes cargo test -p queue-engine --lib cluster_
scripts/redis-cluster.sh stop "$cluster_dir"
trap - EXIT

# What a user gets: each library crate packaged as crates.io would serve it. Each tarball
# is then built twice: by a user's project with default features, as a user's first
# build is (downstream.sh), and with every feature on against the MSRV resolution
# (msrv.sh), so a file only a feature includes must be in the package. `cargo package`'s
# own verification would be a third cold build of the same (5 min on a clean machine).
say "cargo package (the library crates as tarballs)"
cargo package --allow-dirty --no-verify $(printf -- '-p %s ' "${library_crates[@]}")

say "a user's project and the README's quick start built from those packages (scripts/downstream.sh)"
bash scripts/downstream.sh

say "each feature alone (scripts/features.sh)"
bash scripts/features.sh

say "the packages, all features, on their minimum Rust's resolution (scripts/msrv.sh)"
bash scripts/msrv.sh

say "done"
echo "the whole suite passed in $SECONDS s"
