#!/usr/bin/env bash
# A private Redis Cluster on loopback for the test suite: three masters with one
# replica each, on free ports, in DIR. The shared Redis (6379) is never touched.
#
#   scripts/redis-cluster.sh start DIR   starts it; prints the seed URLs, comma-separated
#   scripts/redis-cluster.sh stop DIR    kills its processes (by pid) and removes DIR
set -euo pipefail

command=${1:?start or stop}
dir=${2:?a directory for the nodes}

# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"

case "$command" in
start)
  mkdir -p "$dir"
  ports=()
  for _ in 1 2 3 4 5 6; do
    # Not `$(free_port)`: a subshell would forget the ports already taken.
    free_port >"$dir/.port"
    port=$(cat "$dir/.port")
    mkdir -p "$dir/$port"
    # A replica's first sync at once (Redis waits 5 s by default), and a quick
    # failover: a master silent for 2 s is replaced.
    redis-server --port "$port" --bind 127.0.0.1 --cluster-enabled yes \
      --cluster-config-file nodes.conf --cluster-node-timeout 2000 \
      --repl-diskless-sync-delay 0 --save "" --appendonly no \
      --dir "$dir/$port" --logfile "$dir/$port/redis.log" --daemonize yes \
      --pidfile "$dir/$port/redis.pid"
    ports+=("$port")
  done
  # Each node must answer before the cluster is made of them; one that never does is
  # reported with the end of its log (a port taken between the check and the bind,
  # say), instead of as a bare "Could not connect" from `--cluster create`.
  for port in "${ports[@]}"; do
    up=no
    for _ in $(seq 1 200); do
      if redis-cli -p "$port" ping >/dev/null 2>&1; then up=yes; break; fi
      sleep 0.1
    done
    if [ "$up" = no ]; then
      echo "redis-cluster.sh: the node on port $port did not answer within 20 s; its log:" >&2
      tail -n 20 "$dir/$port/redis.log" >&2 || true
      exit 1
    fi
  done
  addrs=()
  for port in "${ports[@]}"; do addrs+=("127.0.0.1:$port"); done
  redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >"$dir/create.log"
  # Every node agrees the cluster is whole, and every replica has synced.
  for _ in $(seq 1 300); do
    ok=1
    for port in "${ports[@]}"; do
      info=$(redis-cli -p "$port" cluster info)
      repl=$(redis-cli -p "$port" info replication)
      case "$info" in *cluster_state:ok*) ;; *) ok=0 ;; esac
      case "$repl" in *role:master*|*master_link_status:up*) ;; *) ok=0 ;; esac
    done
    [ "$ok" = 1 ] && break
    sleep 0.1
  done
  [ "$ok" = 1 ] || { echo "the test cluster did not come up; see $dir" >&2; exit 1; }
  urls=()
  for port in "${ports[@]}"; do urls+=("redis://127.0.0.1:$port"); done
  (IFS=,; echo "${urls[*]}")
  ;;
stop)
  stop_redis_in "$dir"
  ;;
*)
  echo "usage: $0 start|stop DIR" >&2
  exit 2
  ;;
esac
