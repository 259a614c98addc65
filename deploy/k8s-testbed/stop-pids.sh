# Sourced by k8s-down.sh and kai-testbed/kai-down.sh: stop processes by their pid files.
# stop_pids DIR LABEL NAME...: for each NAME with DIR/NAME.pid, TERM the process, wait up to 10 s
# for it to exit, then KILL it; the pid file is removed either way. LABEL prefixes the message.
stop_pids() {
  local dir="$1" label="$2" name pidfile pid
  shift 2
  for name in "$@"; do
    pidfile="$dir/$name.pid"
    [ -f "$pidfile" ] || continue
    pid="$(cat "$pidfile")"
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid"
      for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
      kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
      echo "stopped $label$name ($pid)"
    fi
    rm -f "$pidfile"
  done
}
