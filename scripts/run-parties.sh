#!/usr/bin/env bash
# Run a fragmented release with every party in its own OS process (its own SparkSession), sharing
# only the configuration's work_dir: owners' metadata, the plan, protected fragments and manifests.
# No raw fragment crosses a party boundary: each owner process reads only its own fragment.
#
# usage: scripts/run-parties.sh CONFIG [--master local[2]]
# (for configurations that simulate owners from one table, a first process cuts the fragments)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: scripts/run-parties.sh CONFIG [--master URL]" >&2; exit 2; }
config="$1"; shift
fr=".venv/bin/fragrelease"
read -r simulated work_dir owners < <(.venv/bin/python -c 'import sys
from fragrelease.protocol.config import load_config
c = load_config(sys.argv[1])
print(int(c.simulated), c.work_dir, " ".join(o.name for o in c.owners))' "$config")
[ -n "${owners:-}" ] || { echo "run-parties: cannot read configuration $config" >&2; exit 2; }
# Remove what an earlier run of this release left in work_dir (metadata/, plan.json, owners/) and
# nothing else: the command refuses (exit 2, one line) a work_dir that holds a source, the output, a
# ledger, a private folder, the configuration or any file no release wrote (jobs/protocol/workspace.py).
echo "== clearing this release's entries in the work folder $work_dir"; "$fr" work clear "$config"
# Signed manifests: owners without configured keys get a key pair for this run (private keys in a
# 0700 temporary folder removed at exit) through a copy of the configuration that names them.
keydir=$(mktemp -d -t fragrelease-keys-XXXXXX)
trap 'rm -rf -- "$keydir"' EXIT
.venv/bin/python - "$config" "$keydir" <<'PY' || exit 2
import sys, yaml
from fragrelease.signing import write_key_pair
conf = yaml.safe_load(open(sys.argv[1], encoding="utf-8"))
for o in conf["owners"]:
    if "signing_key" not in o and "public_key" not in o:
        o["signing_key"], o["public_key"] = write_key_pair(sys.argv[2], o["name"])
open(f"{sys.argv[2]}/config.yaml", "w", encoding="utf-8").write(yaml.safe_dump(conf, sort_keys=False))
PY
config="$keydir/config.yaml"
if [ "$simulated" = 1 ]; then
  echo "== simulation: cutting the owners' fragments"; "$fr" split "$config" "$@"
fi
for o in $owners; do echo "== owner $o: metadata (own process)"; "$fr" owner metadata --config "$config" --owner "$o" "$@"; done
echo "== aggregator: plan (own process)"; "$fr" aggregator plan --config "$config"
pids=()
for o in $owners; do
  echo "== owner $o: protect (own process, in parallel)"
  "$fr" owner protect --config "$config" --owner "$o" "$@" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
echo "== aggregator: release (own process)"; "$fr" aggregator release --config "$config" "$@"
