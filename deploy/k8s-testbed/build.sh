#!/usr/bin/env bash
# Build the test control plane (etcd, kube-apiserver, kube-controller-manager,
# kubectl, kwok) from Go modules into a cache outside the repository, keyed by
# the module files and the Go version, and print the bin directory.
# A second call with the same inputs finds the binaries and builds nothing.
#
# Env: KAI_K8S_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/kai-portal).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
command -v go >/dev/null || { echo "build.sh: need Go (1.25+) on PATH to build the test control plane" >&2; exit 1; }

key="$( (go env GOVERSION GOOS GOARCH; cat "$here"/{kubernetes,etcd,kwok}/go.{mod,sum} "$here"/build.sh) | sha256sum | cut -c1-12)"
cache="${KAI_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kai-portal}/k8s-$key"
bin="$cache/bin"
tools=(etcd kube-apiserver kube-controller-manager kubectl kwok)

complete() { for t in "${tools[@]}"; do [ -x "$bin/$t" ] || return 1; done; }
if complete; then echo "$bin"; exit 0; fi

mkdir -p "$cache"
# One build at a time per cache (several worktrees may ask at once).
exec 9>"$cache/.lock"
flock 9
if complete; then echo "$bin"; exit 0; fi

started=$(date +%s)
echo "building the test control plane into $bin (first time only; ~25-40 min on 2 cores)" >&2
tmp="$cache/bin.partial"
mkdir -p "$tmp"
# -trimpath and -s -w: smaller binaries, no local paths; nice: the machine is shared.
export GOFLAGS="-mod=mod -trimpath"
build() { (cd "$here/$1" && shift && nice -n 10 go build -ldflags="${ldflags:--s -w}" -o "$tmp/" "$@"); }
build etcd .  # the module's last path element names the binary: etcd
# The version Kubernetes' own build stamps in (hack/lib/version.sh): without it the
# binaries call themselves v0.0.0-master and kubectl cannot parse the server's version.
version="$(cd "$here/kubernetes" && go list -m -f '{{.Version}}' k8s.io/kubernetes)"
minor="${version#v1.}"; minor="${minor%%.*}"
stamp=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  stamp+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done
ldflags="-s -w$stamp" build kubernetes k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kubectl
build kwok sigs.k8s.io/kwok/cmd/kwok
mkdir -p "$bin"
for t in "${tools[@]}"; do mv "$tmp/$t" "$bin/$t"; done
rmdir "$tmp" 2>/dev/null || true
echo "built in $(( $(date +%s) - started )) s" >&2
echo "$bin"
