#!/usr/bin/env bash
# Build fragrelease and submit one of its jobs with spark-submit.
#
# usage: ./spark-submit.sh [options] -- <fragrelease arguments>
#   --master URL         Spark master (default: local[*]; yarn, k8s://..., spark://...)
#   --deploy-mode MODE   client (default) or cluster
#   --delta              add Delta Lake (io.delta:delta-spark_<pyspark major.minor>_2.13:<installed delta-spark>)
#                        with its SQL extension and catalog, so releases are written by Spark's delta format
#   --delta-version V    Delta Lake version to use with --delta (default: the installed delta-spark's)
#   --conf KEY=VALUE     extra Spark configuration (repeatable)
#   --archives A         e.g. a packed Python environment: env.tar.gz#env (repeatable)
#   --no-build           do not rebuild the wheel (use the one in dist/)
#   --dry-run            print the spark-submit command and exit
#   -h, --help           this text
# examples:
#   ./spark-submit.sh --master yarn --delta -- aggregator release --config conf/clinics.yaml
#   ./spark-submit.sh --dry-run -- run conf/adult-horizontal.yaml
# Configuration files (*.yaml) given as arguments are shipped with --files, with the schema file a
# configuration names (dataset: path/to/schema.yaml); in cluster deploy mode their paths are
# rewritten to the shipped copies (a copy of the configuration naming the shipped schema).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

master="local[*]"; deploy_mode="client"; delta=0; delta_version=""; build=1; dry_run=0
confs=(); archives=()
usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "spark-submit.sh: $*" >&2; echo "run ./spark-submit.sh --help for usage" >&2; exit 2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --master) [ $# -ge 2 ] || die "--master needs a value"; master="$2"; shift 2 ;;
    --deploy-mode) [ $# -ge 2 ] || die "--deploy-mode needs a value"
      case "$2" in client|cluster) deploy_mode="$2" ;; *) die "--deploy-mode must be client or cluster, not '$2'" ;; esac
      shift 2 ;;
    --delta) delta=1; shift ;;
    --delta-version) [ $# -ge 2 ] || die "--delta-version needs a value"; delta_version="$2"; delta=1; shift 2 ;;
    --conf) [ $# -ge 2 ] || die "--conf needs KEY=VALUE"
      case "$2" in *=*) confs+=("$2") ;; *) die "--conf needs KEY=VALUE, not '$2'" ;; esac
      shift 2 ;;
    --archives) [ $# -ge 2 ] || die "--archives needs a value"; archives+=("$2"); shift 2 ;;
    --no-build) build=0; shift ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) die "unknown option '$1' (put the fragrelease arguments after --)" ;;
  esac
done
[ $# -gt 0 ] || die "no fragrelease arguments given after --"

py="${PYTHON:-}"
if [ -z "$py" ]; then
  if [ -x "$here/.venv/bin/python" ]; then py="$here/.venv/bin/python"; else py="python3"; fi
fi
version=$(sed -n 's/^__version__ = "\([^"]*\)".*/\1/p' "$here/fragrelease/version.py" | head -1)  # the one version source
[ -n "$version" ] || die "cannot read __version__ from $here/fragrelease/version.py"
wheel="$here/dist/fragrelease-${version}-py3-none-any.whl"
# What is shipped: the same (pure-Python) wheel under a .zip name. PySpark puts --py-files on the
# executors' Python path only for .zip, .egg and .jar files; a .whl is fetched but never imported,
# so executors would need fragrelease installed on every node.
shipped="$here/dist/fragrelease-${version}-py3-none-any.zip"

if [ "$delta" = 1 ] && [ -z "$delta_version" ]; then
  delta_version=$("$py" -c 'import importlib.metadata as m; print(m.version("delta-spark"))' 2>/dev/null) \
    || die "--delta: cannot find the installed delta-spark version; pass --delta-version"
fi
# Delta's jars are published per Spark minor version (io.delta:delta-spark_4.2_2.13 for Spark 4.2)
spark_mm=""
if [ "$delta" = 1 ]; then
  spark_mm=$("$py" -c 'import pyspark; print(".".join(pyspark.__version__.split(".")[:2]))' 2>/dev/null) \
    || die "--delta: cannot find the installed pyspark version"
fi

# The schema YAML a configuration names (`dataset: path/to/schema.yaml`), or nothing for a built-in dataset.
schema_of() {
  "$py" - "$1" <<'PY'
import sys
import yaml
try:
    data = yaml.safe_load(open(sys.argv[1], encoding="utf-8"))
except Exception:
    data = None
ds = data.get("dataset") if isinstance(data, dict) else None
print(ds if isinstance(ds, str) and ds.endswith((".yaml", ".yml")) else "")
PY
}
# In cluster mode: a copy of configuration $1 whose dataset is the shipped schema's file name $2 (the
# driver runs in the folder where --files puts both). Written under dist/cluster-files/, which this
# script owns; prints the copy's path.
cluster_copy() {
  mkdir -p "$here/dist/cluster-files"
  "$py" - "$1" "$2" "$here/dist/cluster-files/$(basename "$1")" <<'PY'
import sys
import yaml
src, schema, dst = sys.argv[1:]
data = yaml.safe_load(open(src, encoding="utf-8"))
data["dataset"] = schema
with open(dst, "w", encoding="utf-8") as f:
    f.write(f"# written by spark-submit.sh for cluster deploy mode from {src}: dataset is the shipped schema\n")
    yaml.safe_dump(data, f, sort_keys=False, allow_unicode=True)
print(dst)
PY
}

files=(); args=()
for a in "$@"; do
  if [[ "$a" == *.yaml || "$a" == *.yml ]] && [ -f "$a" ]; then
    schema=$(schema_of "$a")
    shipped_conf="$a"
    if [ -n "$schema" ]; then
      # the schema is read relative to the driver's working folder, as fragrelease reads it
      [ -f "$schema" ] || die "configuration $a names dataset '$schema', which is not a file here"
      if [ "$(basename "$schema")" = "$(basename "$a")" ]; then
        die "configuration $a and its schema $schema have the same file name; rename one"
      fi
      files+=("$schema")
      if [ "$deploy_mode" = cluster ]; then shipped_conf=$(cluster_copy "$a" "$(basename "$schema")"); fi
    fi
    files+=("$shipped_conf")
    if [ "$deploy_mode" = cluster ]; then args+=("$(basename "$a")"); else args+=("$a"); fi
  else
    args+=("$a")
  fi
done

cmd=(spark-submit --master "$master" --deploy-mode "$deploy_mode" --name "fragrelease $*" --py-files "$shipped")
if [ "$delta" = 1 ]; then
  cmd+=(--packages "io.delta:delta-spark_${spark_mm}_2.13:${delta_version}"
        --conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension
        --conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog)
fi
for c in ${confs[@]+"${confs[@]}"}; do cmd+=(--conf "$c"); done
for a in ${archives[@]+"${archives[@]}"}; do cmd+=(--archives "$a"); done
if [ ${#files[@]} -gt 0 ]; then cmd+=(--files "$(IFS=,; echo "${files[*]}")"); fi
cmd+=("$here/scripts/spark_entry.py" "${args[@]}")

if [ "$dry_run" = 1 ]; then
  printf '%q ' "${cmd[@]}"; echo
  exit 0
fi
if [ "$build" = 1 ]; then
  "$py" -m pip wheel --quiet --no-deps -w "$here/dist" "$here" >/dev/null
fi
[ -f "$wheel" ] || die "wheel $wheel not found (build failed, or --no-build without a wheel)"
if [ ! -f "$shipped" ] || ! cmp -s "$wheel" "$shipped"; then cp -f "$wheel" "$shipped"; fi
command -v spark-submit >/dev/null 2>&1 || {
  # pyspark ships spark-submit in its bin folder
  sparkbin=$("$py" -c 'import pyspark, os; print(os.path.join(os.path.dirname(pyspark.__file__), "bin"))')
  PATH="$sparkbin:$PATH"
}
export PYSPARK_PYTHON="${PYSPARK_PYTHON:-$py}"
case "$master" in
  # a standalone master on this machine's loopback (scripts/standalone-cluster.sh): the driver binds
  # there too, so no party's traffic leaves the machine's loopback interface
  spark://127.*|spark://localhost:*) export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}" ;;
esac
exec "${cmd[@]}"
