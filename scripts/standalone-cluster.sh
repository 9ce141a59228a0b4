#!/usr/bin/env bash
# Start, stop or check a Spark standalone cluster on this machine: one master and N workers, each its
# own JVM, launched with the installed pyspark's spark-class (nothing is downloaded).
#
# usage: scripts/standalone-cluster.sh start|stop|status
#
# Environment (defaults in brackets):
#   FRAGRELEASE_CLUSTER_DIR  pid files, logs, the workers' work and local dirs [${TMPDIR:-/tmp}/fragrelease-cluster]
#   SPARK_MASTER_HOST        address the master and workers bind to [127.0.0.1]
#   SPARK_MASTER_PORT        master port [7077]         SPARK_MASTER_WEBUI_PORT  master web UI [8080]
#   SPARK_WORKER_INSTANCES   number of workers [2]      SPARK_WORKER_CORES       cores per worker [1]
#   SPARK_WORKER_MEMORY      memory per worker [1g]     PYTHON  interpreter whose pyspark is used [.venv/bin/python]
#   FRAGRELEASE_CLUSTER_TIMEOUT  seconds to wait for the master and each worker [90]
#
# Files in FRAGRELEASE_CLUSTER_DIR: master.pid, worker-<i>.pid (JVM pids), logs/*.log, worker-<i>/
# (the executors' folders: an application's executor runs as a child process of its worker).
# `start` returns once every worker has registered with the master; it prints the master URL, which
# jobs take as `--master spark://HOST:PORT` (e.g. ./spark-submit.sh --master spark://127.0.0.1:7077 -- ...).
# `stop` ends the workers (and their executors) and the master: SIGTERM, then SIGKILL after 15 s.
# `status` exits 0 when the master and every worker run, 3 otherwise.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"

dir="${FRAGRELEASE_CLUSTER_DIR:-${TMPDIR:-/tmp}/fragrelease-cluster}"
host="${SPARK_MASTER_HOST:-127.0.0.1}"
port="${SPARK_MASTER_PORT:-7077}"
webui="${SPARK_MASTER_WEBUI_PORT:-8080}"
workers="${SPARK_WORKER_INSTANCES:-2}"
cores="${SPARK_WORKER_CORES:-1}"
memory="${SPARK_WORKER_MEMORY:-1g}"
timeout="${FRAGRELEASE_CLUSTER_TIMEOUT:-90}"

die() { echo "standalone-cluster: $*" >&2; exit 2; }
for v in port webui workers cores timeout; do
  [[ "${!v}" =~ ^[0-9]+$ ]] || die "$v must be a whole number, not '${!v}'"
done
[ "$workers" -ge 1 ] || die "SPARK_WORKER_INSTANCES must be at least 1, not '$workers'"
[[ "$memory" =~ ^[0-9]+[mMgG]$ ]] || die "SPARK_WORKER_MEMORY must look like 512m or 1g, not '$memory'"

py="${PYTHON:-}"
if [ -z "$py" ]; then
  if [ -x "$here/.venv/bin/python" ]; then py="$here/.venv/bin/python"; else py="python3"; fi
fi

# A pid from our pid file that is alive and still one of Spark's deploy daemons (not a reused pid).
alive() {
  local pid="$1" class="$2"
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "$class"
}
pid_of() { [ -f "$1" ] && cat "$1" || true; }

# Wait until a log line appears; fail early if the process died.
wait_for() {
  local pid="$1" log="$2" pattern="$3" what="$4" t=0
  while ! grep -q "$pattern" "$log" 2>/dev/null; do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "standalone-cluster: $what exited during start-up; last lines of $log:" >&2
      tail -n 30 "$log" >&2 || true
      return 1
    fi
    if [ "$t" -ge "$((timeout * 5))" ]; then
      echo "standalone-cluster: $what not ready after ${timeout} s; last lines of $log:" >&2
      tail -n 30 "$log" >&2 || true
      return 1
    fi
    sleep 0.2; t=$((t + 1))
  done
}

start() {
  if alive "$(pid_of "$dir/master.pid")" deploy.master.Master; then
    echo "standalone-cluster: already running (FRAGRELEASE_CLUSTER_DIR=$dir)"
    status
    return
  fi
  command -v java >/dev/null 2>&1 || [ -x "${JAVA_HOME:-/nonexistent}/bin/java" ] \
    || die "no Java runtime: Spark needs Java 17 or 21 (JAVA_HOME or java on PATH)"
  local spark_home
  spark_home=$("$py" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))') \
    || die "$py cannot import pyspark (run scripts/setup.sh, or set PYTHON)"
  export SPARK_HOME="$spark_home"
  export SPARK_LOCAL_IP="$host"
  export PYSPARK_PYTHON="${PYSPARK_PYTHON:-$py}"
  mkdir -p "$dir/logs"
  rm -f "$dir"/*.pid "$dir"/logs/*.log
  local spark_class="$spark_home/bin/spark-class"

  SPARK_LOCAL_DIRS="$dir/master/local" nohup "$spark_class" org.apache.spark.deploy.master.Master \
    --host "$host" --port "$port" --webui-port "$webui" >"$dir/logs/master.log" 2>&1 </dev/null &
  echo $! >"$dir/master.pid"
  if ! wait_for "$!" "$dir/logs/master.log" "Starting Spark master at" "the master"; then stop; exit 1; fi
  if grep -q "Service 'sparkMaster' could not bind" "$dir/logs/master.log"; then stop; die "port $port is in use"; fi

  local i pids=()
  for i in $(seq 1 "$workers"); do
    mkdir -p "$dir/worker-$i/work" "$dir/worker-$i/local"
    SPARK_LOCAL_DIRS="$dir/worker-$i/local" SPARK_WORKER_DIR="$dir/worker-$i/work" nohup "$spark_class" \
      org.apache.spark.deploy.worker.Worker --host "$host" --cores "$cores" --memory "$memory" \
      --work-dir "$dir/worker-$i/work" --webui-port 0 "spark://$host:$port" \
      >"$dir/logs/worker-$i.log" 2>&1 </dev/null &
    echo $! >"$dir/worker-$i.pid"
    pids+=("$!")
  done
  for i in $(seq 1 "$workers"); do
    if ! wait_for "${pids[$((i - 1))]}" "$dir/logs/worker-$i.log" "Successfully registered with master" "worker $i"; then
      stop; exit 1
    fi
  done
  echo "standalone-cluster: master spark://$host:$port (web UI http://$host:$webui), $workers worker(s) of" \
       "$cores core(s) and $memory each; files in $dir"
}

stop_pid() {
  local pid="$1" class="$2" t=0
  alive "$pid" "$class" || return 0
  kill -TERM "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null && [ "$t" -lt 75 ]; do sleep 0.2; t=$((t + 1)); done
  if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
}

stop() {
  local f
  for f in "$dir"/worker-*.pid; do
    [ -f "$f" ] || continue
    stop_pid "$(cat "$f")" deploy.worker.Worker
    rm -f "$f"
  done
  if [ -f "$dir/master.pid" ]; then
    stop_pid "$(cat "$dir/master.pid")" deploy.master.Master
    rm -f "$dir/master.pid"
  fi
  echo "standalone-cluster: stopped ($dir)"
}

status() {
  local ok=0 f
  if alive "$(pid_of "$dir/master.pid")" deploy.master.Master; then
    echo "master   spark://$host:$port  pid $(cat "$dir/master.pid")  running"
  else
    echo "master   spark://$host:$port  not running"; ok=3
  fi
  local any=0
  for f in "$dir"/worker-*.pid; do
    [ -f "$f" ] || continue
    any=1
    local name pid
    name=$(basename "$f" .pid); pid=$(cat "$f")
    if alive "$pid" deploy.worker.Worker; then echo "$name pid $pid  running"; else echo "$name pid $pid  not running"; ok=3; fi
  done
  [ "$any" = 1 ] || { echo "no workers"; ok=3; }
  return "$ok"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//' ;;
  *) echo "usage: scripts/standalone-cluster.sh start|stop|status" >&2; exit 2 ;;
esac
