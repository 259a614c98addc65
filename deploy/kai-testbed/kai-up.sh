#!/usr/bin/env bash
# Run KAI Scheduler's own components, built from a KAI source tree, out of cluster
# against the test control plane (deploy/k8s-testbed), so that a scenario can be
# applied once to the portal and once to KAI on the same cluster and compared
# (deploy/kai-testbed/compare.py; docs/kai-parity.md).
#
#   make kai-up KAI_SRC=/path/to/KAI-Scheduler     (deploy/kai-testbed/kai-up.sh "$KAI_SRC")
#   make kai-down                                  (deploy/kai-testbed/kai-down.sh)
#
# Starts the control plane first when none is running in K8S_DIR. Refuses while the
# portal's scheduling loop holds its Lease on that cluster: both answer to pods with
# schedulerName kai-scheduler, so only one may run at a time.
#
# Env: K8S_DIR (default var/k8s): the control plane's directory (admin kubeconfig, kubectl).
#      KAI_BED_DIR (default var/kai): KAI's logs and pid files.
#      KAI_BED_CACHE: where the binaries are built (see build.sh).
#      KAI_SCHEDULER_NAME (default kai-scheduler): the schedulerName KAI answers to.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# shellcheck source=deploy/kai-testbed/common.sh
. "$here/common.sh"
src="$(kai_src_check "${1:-${KAI_SRC:-}}")"
k8s_dir="${K8S_DIR:-$repo/var/k8s}"
mkdir -p "$k8s_dir"
k8s_dir="$(cd "$k8s_dir" && pwd)"
dir="${KAI_BED_DIR:-$repo/var/kai}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
name="${KAI_SCHEDULER_NAME:-kai-scheduler}"

if kai_running "$dir" >/dev/null; then
  echo "kai-testbed: KAI already running ($(kai_running "$dir")); make kai-down first to restart"
  exit 0
fi
"$here/kai-down.sh" >/dev/null 2>&1 || true  # leftovers of a half-started one

if ! { [ -f "$k8s_dir/kube-apiserver.pid" ] && kill -0 "$(cat "$k8s_dir/kube-apiserver.pid")" 2>/dev/null; }; then
  echo "kai-testbed: no control plane running in $k8s_dir; starting one (make k8s-up)"
  K8S_DIR="$k8s_dir" "$repo/deploy/k8s-testbed/k8s-up.sh"
fi
export KUBECONFIG="$k8s_dir/admin.kubeconfig"
kubectl="$(cat "$k8s_dir/bin-dir")/kubectl"

# The portal's loop holds a Lease named kai-portal-<SCHEDULER_NAME> while it runs (renewed every
# cycle); a fresh one means a portal is scheduling this cluster now.
holder="$("$here/portal_lease.py" "$kubectl")" || exit 1
if [ -n "$holder" ]; then
  echo "kai-testbed: the portal's scheduling loop is running on this cluster ($holder)." >&2
  echo "  Stop it first (manage.py run_scheduler / make run / the Celery worker): the portal and KAI both" >&2
  echo "  schedule pods with schedulerName kai-scheduler, and only one may run at a time." >&2
  exit 1
fi

bin="$("$here/build.sh" "$src")"  # nothing to do when this source was built before

echo "kai-testbed: applying KAI's CRDs from $src/deployments/kai-scheduler/crds"
"$kubectl" apply --server-side --force-conflicts --field-manager=kai-testbed \
  -f "$src/deployments/kai-scheduler/crds/" >"$dir/crds.log"
"$kubectl" wait --for=condition=established --timeout=60s \
  crd/queues.scheduling.run.ai crd/podgroups.scheduling.run.ai >>"$dir/crds.log"

start() {  # name, args...: detached, so make returning does not stop it
  local comp="$1"; shift
  setsid "$bin/$comp" "$@" >"$dir/$comp.log" 2>&1 </dev/null &
  echo $! >"$dir/$comp.pid"
}
# No serving ports (several worktrees share the machine): metrics and probes off, webhooks off
# (they need TLS and a Service; the bed has neither), no leader election (one replica each).
off=(--metrics-bind-address 0 --health-probe-bind-address 0)
start podgrouper "${off[@]}" --scheduler-name "$name"
start podgroupcontroller "${off[@]}" --scheduler-name "$name" --enable-podgroup-webhook=false
start queuecontroller --metrics-listen-address 0 --enable-webhook=false
start binder "${off[@]}"
start scheduler --scheduler-name "$name" --listen-address 127.0.0.1:0 --plugin-server-port 0
echo "$src" >"$dir/source"
cp "$(dirname "$bin")/BUILD-INFO" "$dir/BUILD-INFO" 2>/dev/null || true

sleep 3
for comp in "${KAI_COMPONENTS[@]}"; do
  if ! kill -0 "$(cat "$dir/$comp.pid")" 2>/dev/null; then
    echo "kai-testbed: KAI's $comp exited at start; the end of $dir/$comp.log:" >&2
    tail -n 20 "$dir/$comp.log" >&2
    "$here/kai-down.sh" >/dev/null 2>&1 || true
    exit 1
  fi
done
echo "KAI up (${KAI_COMPONENTS[*]}; schedulerName $name) on KUBECONFIG=$KUBECONFIG; logs in $dir/*.log"
echo "Do not start the portal's loop on this cluster until make kai-down."
