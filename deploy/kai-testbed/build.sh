#!/usr/bin/env bash
# Build KAI Scheduler's own components from a KAI source tree the user gives
# (KAI is not on the Go module proxy) into a cache outside the repository, and
# print the bin directory. The cache is keyed by the source's Go files, module
# files and the Go version, so a second call for the same source builds nothing,
# and an edited checkout is never mistaken for the one already built.
#
# Usage: build.sh <KAI_SRC>
# Env: KAI_BED_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/kai-portal).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=deploy/kai-testbed/common.sh
. "$here/common.sh"
src="$(kai_src_check "${1:-}")"
command -v go >/dev/null || { echo "kai-testbed: need Go (the version in $src/go.mod) on PATH to build KAI" >&2; exit 1; }

key="$(kai_src_key "$src")"
cache="${KAI_BED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kai-portal}/kai-$key"
bin="$cache/bin"

complete() { for t in "${KAI_COMPONENTS[@]}"; do [ -x "$bin/$t" ] || return 1; done; }
if complete; then echo "$bin"; exit 0; fi

mkdir -p "$cache"
exec 9>"$cache/.lock"  # one build at a time per source (several worktrees may ask at once)
flock 9
if complete; then echo "$bin"; exit 0; fi

started=$(date +%s)
echo "kai-testbed: building KAI (${KAI_COMPONENTS[*]}) from $src into $bin (first time for this source; 10-40 min on 2 cores)" >&2
tmp="$cache/bin.partial"
rm -rf "$tmp"; mkdir -p "$tmp"
pkgs=(); for t in "${KAI_COMPONENTS[@]}"; do pkgs+=("./cmd/$t"); done
# -trimpath and -s -w: smaller binaries, no local paths; nice: the machine is shared.
(cd "$src" && GOFLAGS="-mod=mod -trimpath -buildvcs=false" nice -n 10 go build -ldflags="-s -w" -o "$tmp/" "${pkgs[@]}")
mkdir -p "$bin"
for t in "${KAI_COMPONENTS[@]}"; do mv "$tmp/$t" "$bin/$t"; done
rmdir "$tmp" 2>/dev/null || true
printf 'source %s\ncommit %s\nkey %s\nbuilt %s in %s s\n' "$src" "$(kai_src_commit "$src")" "$key" \
  "$(date -u +%FT%TZ)" "$(( $(date +%s) - started ))" >"$cache/BUILD-INFO"
echo "kai-testbed: built in $(( $(date +%s) - started )) s" >&2
echo "$bin"
