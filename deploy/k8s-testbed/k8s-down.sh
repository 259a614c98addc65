#!/usr/bin/env bash
# Stop what k8s-up.sh started (by its pid files, newest first) and wait for it to exit.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# shellcheck source=deploy/k8s-testbed/stop-pids.sh
. "$here/stop-pids.sh"
stop_pids "${K8S_DIR:-$repo/var/k8s}" "" kwok kube-controller-manager kube-apiserver etcd
