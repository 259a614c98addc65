#!/usr/bin/env bash
# Stop KAI's components started by kai-up.sh (by their pid files) and wait for them to exit.
# The control plane keeps running: make k8s-down stops it.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# shellcheck source=deploy/kai-testbed/common.sh
. "$here/common.sh"
# shellcheck source=deploy/k8s-testbed/stop-pids.sh
. "$repo/deploy/k8s-testbed/stop-pids.sh"
stop_pids "${KAI_BED_DIR:-$repo/var/kai}" "KAI's " "${KAI_COMPONENTS[@]}"
