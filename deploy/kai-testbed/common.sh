# Shared by the KAI test bed's scripts (sourced, not run).

# KAI's components the bed builds and runs out of cluster: enough for whole-GPU
# scheduling, pod grouping, PodGroup status and Queue status.
KAI_COMPONENTS=(scheduler binder podgrouper queuecontroller podgroupcontroller)

# Print the absolute KAI source path, or fail saying what is wrong and what to do.
kai_src_check() {
  local src="$1"
  if [ -z "$src" ]; then
    echo "kai-testbed: KAI_SRC is not set. KAI is not on the Go module proxy, so the bed builds it from a checkout:" >&2
    echo "  git clone https://github.com/kai-scheduler/KAI-Scheduler /path/to/kai && make kai-up KAI_SRC=/path/to/kai" >&2
    return 1
  fi
  if [ ! -d "$src" ]; then
    echo "kai-testbed: KAI_SRC=$src does not exist (give the path of a KAI-Scheduler checkout)" >&2
    return 1
  fi
  src="$(cd "$src" && pwd)"
  if ! grep -qs '^module github.com/kai-scheduler/KAI-scheduler$' "$src/go.mod" \
     || [ ! -d "$src/deployments/kai-scheduler/crds" ]; then
    echo "kai-testbed: KAI_SRC=$src is not KAI Scheduler's source: expected go.mod declaring module" \
      "github.com/kai-scheduler/KAI-scheduler and deployments/kai-scheduler/crds/ (give a KAI-Scheduler checkout)" >&2
    return 1
  fi
  local t
  for t in "${KAI_COMPONENTS[@]}"; do
    if [ ! -d "$src/cmd/$t" ]; then
      echo "kai-testbed: KAI_SRC=$src has no cmd/$t (this bed needs a KAI with ${KAI_COMPONENTS[*]})" >&2
      return 1
    fi
  done
  echo "$src"
}

# The commit of a git checkout, or "unknown" for a plain copy.
kai_src_commit() {
  git -C "$1" rev-parse HEAD 2>/dev/null || echo unknown
}

# Cache key: every Go file and the module files, plus the Go version, so an edited
# checkout (or a plain copy without .git) still gets its own build.
kai_src_key() {
  local src="$1"
  ( cd "$src" && go env GOVERSION GOOS GOARCH \
    && { echo go.mod; echo go.sum; find cmd pkg -name '*.go' -type f; } | LC_ALL=C sort | xargs sha256sum
  ) | sha256sum | cut -c1-12
}

# Print the KAI components running from pid files in directory $1 ("name pid, ..."); fail if none.
kai_running() {
  local dir="$1" out="" comp pid
  for comp in "${KAI_COMPONENTS[@]}"; do
    [ -f "$dir/$comp.pid" ] || continue
    pid="$(cat "$dir/$comp.pid")"
    kill -0 "$pid" 2>/dev/null && out+="${out:+, }$comp $pid"
  done
  [ -n "$out" ] && echo "$out"
}
