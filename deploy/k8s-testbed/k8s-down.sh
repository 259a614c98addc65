#!/usr/bin/env bash
# Stop what k8s-up.sh started (by its pid files, newest first) and wait for it to exit.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
dir="${K8S_DIR:-$repo/var/k8s}"
for name in kwok kube-controller-manager kube-apiserver etcd; do
  pidfile="$dir/$name.pid"
  [ -f "$pidfile" ] || continue
  pid="$(cat "$pidfile")"
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
    echo "stopped $name ($pid)"
  fi
  rm -f "$pidfile"
done
