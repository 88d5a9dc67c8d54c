# Helpers the set-up scripts share: run as root, install Debian packages once updated.
# Sourced by the scripts beside it.

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    echo "need root to run: $*" >&2; exit 1
  fi
}

apt_updated=""
apt_install() {
  if [ -z "$apt_updated" ]; then as_root apt-get update -qq; apt_updated=1; fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# The crates we publish, in dependency order: each is packaged, feature-checked, built on
# the MSRV and tested on its own.
library_crates=(queue-engine queue-vocab queue-macros queue-core queue-axum queue-dashboard)

# A field of one of the workspace's packages, from `cargo metadata` (FIELD: a key of the
# package object; a list or map prints as space-separated keys).
package_field() {
  cargo metadata --format-version 1 --no-deps | python3 -c '
import json, sys
name, field = sys.argv[1], sys.argv[2]
package = next(p for p in json.load(sys.stdin)["packages"] if p["name"] == name)
value = package[field]
print(" ".join(k for k in value if k != "default") if isinstance(value, (dict, list)) else value)
' "$1" "$2"
}

# The tarball `cargo package` made of a library crate (target/package/NAME-VERSION.crate),
# or a failure that says to package first. Its unpacked folder is the name without
# `.crate`.
package_tarball() {
  local tarball
  tarball=target/package/$1-$(package_field "$1" version).crate
  [ -f "$tarball" ] || { echo "missing $tarball: run cargo package first" >&2; return 1; }
  echo "$tarball"
}

# A port nothing listens on, whose cluster bus port (10000 higher) is free too. Both
# stay below Linux's ephemeral ports (32768 and up): there an outgoing connection of any
# process can hold the port without listening on it, which the check cannot see, and
# a node then fails to bind ("Address already in use"). Call it in the shell that starts
# the servers, not as `$(free_port)`: a subshell would forget the ports already taken.
in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
taken=" "
free_port() {
  while :; do
    port=$((10000 + RANDOM % 12000))
    case "$taken" in *" $port "*) continue ;; esac
    if ! in_use "$port" && ! in_use $((port + 10000)); then
      taken="$taken$port "
      echo "$port"
      return
    fi
  done
}

# Stops the private redis-servers whose pid files lie in DIR or one folder below it, and
# removes DIR once they are gone. A server stopped gently logs its shutdown, and Redis
# reopens its log file for every line: removing the folder while it still runs lets it
# create the file again, and `rm` fails with "Directory not empty". So: SIGKILL (nothing
# of a test server is worth saving), wait for the process to end, then remove.
stop_redis_in() {
  local dir=$1 pidfile pid
  for pidfile in "$dir"/redis.pid "$dir"/*/redis.pid; do
    [ -f "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    kill -9 "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  done
  rm -rf "$dir"
}
