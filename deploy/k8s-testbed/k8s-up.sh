#!/usr/bin/env bash
# Start a throwaway Kubernetes control plane on loopback: etcd, kube-apiserver
# (RBAC, default admission plugins), kube-controller-manager and KWOK, which
# plays the kubelet for every node annotated kwok.x-k8s.io/node=fake.
#
#   deploy/k8s-testbed/k8s-up.sh     (make k8s-up)
#   deploy/k8s-testbed/k8s-down.sh   (make k8s-down)
#
# Env: K8S_DIR (default var/k8s): certificates, kubeconfigs, logs, pid files
# and etcd's data. The admin kubeconfig is $K8S_DIR/admin.kubeconfig. Ports are
# picked free at start (several worktrees share one machine) and written to
# $K8S_DIR/ports.env. etcd's data is wiped on every start: the cluster is for tests.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
dir="${K8S_DIR:-$repo/var/k8s}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"

running() { [ -f "$dir/$1.pid" ] && kill -0 "$(cat "$dir/$1.pid")" 2>/dev/null; }
if running kube-apiserver; then
  echo "control plane already running ($dir/admin.kubeconfig); make k8s-down first to restart"
  exit 0
fi
"$here/k8s-down.sh" >/dev/null 2>&1 || true  # leftovers of a half-started one

bin="$("$here/build.sh")"
echo "$bin" > "$dir/bin-dir"
pki="$dir/pki"
"$here/certs.sh" "$pki"

# Free loopback ports: etcd client, etcd peer, API server.
read -r etcd_port peer_port api_port < <(python3 - <<'PY'
import socket
socks = [socket.socket() for _ in range(3)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
for s in socks:
    s.close()
PY
)
printf 'ETCD_PORT=%s\nAPISERVER_PORT=%s\n' "$etcd_port" "$api_port" > "$dir/ports.env"
server="https://127.0.0.1:$api_port"

kubeconfig() {  # name, client cert base name
  local file="$dir/$1.kubeconfig"
  rm -f "$file"
  "$bin/kubectl" --kubeconfig "$file" config set-cluster kai-test --server "$server" \
    --certificate-authority "$pki/ca.crt" --embed-certs >/dev/null
  "$bin/kubectl" --kubeconfig "$file" config set-credentials "$2" \
    --client-certificate "$pki/$2.crt" --client-key "$pki/$2.key" --embed-certs >/dev/null
  "$bin/kubectl" --kubeconfig "$file" config set-context kai-test --cluster kai-test --user "$2" >/dev/null
  "$bin/kubectl" --kubeconfig "$file" config use-context kai-test >/dev/null
}
kubeconfig admin admin
kubeconfig controller-manager controller-manager
kubeconfig kwok kwok

start() {  # name, command...: detached from this shell, so make returning does not stop it
  local name="$1"; shift
  setsid "$@" >"$dir/$name.log" 2>&1 < /dev/null &
  echo $! > "$dir/$name.pid"
}
wait_for() {  # what, seconds, test command...
  local what="$1" limit="$2"; shift 2
  local deadline=$(( $(date +%s) + limit ))
  until "$@" >/dev/null 2>&1; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "k8s-up: $what not ready after ${limit}s; see $dir/*.log" >&2
      "$here/k8s-down.sh" >/dev/null 2>&1 || true
      exit 1
    fi
    sleep 0.5
  done
}
http_ok() { python3 -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)" "$1"; }

rm -rf "$dir/etcd-data"
# --unsafe-no-fsync: a test cluster's data is disposable; fsync on a shared disk is slow.
start etcd "$bin/etcd" --name default --data-dir "$dir/etcd-data" \
  --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
  --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
  --initial-cluster "default=http://127.0.0.1:$peer_port" --unsafe-no-fsync --log-level warn
wait_for etcd 60 http_ok "http://127.0.0.1:$etcd_port/health"

start kube-apiserver "$bin/kube-apiserver" \
  --etcd-servers "http://127.0.0.1:$etcd_port" \
  --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
  --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
  --client-ca-file "$pki/ca.crt" \
  --authorization-mode Node,RBAC \
  --allow-privileged=true \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
  --service-cluster-ip-range 10.96.0.0/16 \
  --enable-priority-and-fairness=false \
  --profiling=false
wait_for kube-apiserver 120 "$bin/kubectl" --kubeconfig "$dir/admin.kubeconfig" get --raw /readyz

controllers="job-controller,replicaset-controller,deployment-controller,garbage-collector-controller"
controllers+=",pod-garbage-collector-controller,disruption-controller,serviceaccount-controller"
controllers+=",serviceaccount-token-controller,namespace-controller,root-ca-certificate-publisher-controller"
# node-lifecycle-controller takes the node.kubernetes.io/not-ready:NoSchedule taint (put on every new
# node by the TaintNodesByCondition admission plugin) off a node once it reports Ready, as in any
# cluster; without it a KWOK node made by hand keeps the taint and nothing tolerates it. Taint-based
# eviction is the separate taint-eviction-controller, not run: a node the tests leave silent keeps its pods.
controllers+=",node-lifecycle-controller"
# Each controller runs as its own service account (RBAC's bootstrap roles);
# --secure-port 0: no serving port to collide with another worktree's.
start kube-controller-manager "$bin/kube-controller-manager" \
  --kubeconfig "$dir/controller-manager.kubeconfig" \
  --authentication-kubeconfig "$dir/controller-manager.kubeconfig" \
  --authorization-kubeconfig "$dir/controller-manager.kubeconfig" \
  --use-service-account-credentials \
  --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
  --controllers "$controllers" \
  --leader-elect=false --secure-port 0 --concurrent-gc-syncs 5
# Pods are admitted only once their namespace's default ServiceAccount exists.
wait_for "kube-controller-manager (default ServiceAccount)" 120 \
  "$bin/kubectl" --kubeconfig "$dir/admin.kubeconfig" -n default get serviceaccount default

# Node stages are KWOK's defaults (initialize, heartbeat); pod stages are ours.
start kwok "$bin/kwok" --kubeconfig "$dir/kwok.kubeconfig" \
  --config "$here/kwok-stages.yaml" \
  --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
  --node-lease-duration-seconds 40 --server-address ""
sleep 1
running kwok || { echo "k8s-up: kwok exited; see $dir/kwok.log" >&2; "$here/k8s-down.sh" >/dev/null 2>&1; exit 1; }

echo "control plane up: KUBECONFIG=$dir/admin.kubeconfig (API server $server; logs in $dir/*.log)"
