#!/usr/bin/env bash
# Stop KAI's components started by kai-up.sh (by their pid files) and wait for them to exit.
# The control plane keeps running: make k8s-down stops it.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# shellcheck source=deploy/kai-testbed/common.sh
. "$here/common.sh"
dir="${KAI_BED_DIR:-$repo/var/kai}"
for comp in "${KAI_COMPONENTS[@]}"; do
  pidfile="$dir/$comp.pid"
  [ -f "$pidfile" ] || continue
  pid="$(cat "$pidfile")"
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
    echo "stopped KAI's $comp ($pid)"
  fi
  rm -f "$pidfile"
done
