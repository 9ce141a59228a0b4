#!/usr/bin/env bash
# Delta Lake's jars for the embedded Spark session, fetched once with Maven into the folder the session
# loads with spark.jars (fragrelease.jobs.session.delta_jars_dir: .venv/fragrelease-jars/<artifact>-<version>,
# or $FRAGRELEASE_DELTA_JARS). scripts/setup.sh runs it; it can also be run alone:
#   scripts/fetch-delta-jars.sh [PYTHON]       (default .venv/bin/python: the venv whose pyspark and delta-spark count)
# The jars pyspark already ships (Spark, Scala, Hadoop, Parquet, Jackson, ...) are left out.
#
# Maven resolves into a throw-away local repository (-Dmaven.repo.local), removed when it ends: the
# user's ~/.m2 is neither read nor written. Resolving Delta's dependencies downloads POMs whose jars are
# never fetched (slf4j-api 2.0.13, snappy-java 1.1.10.7, ...); in ~/.m2/repository such a POM-only
# folder makes Spark's Ivy resolver (spark.jars.packages, e.g. delta's configure_spark_with_delta_pip)
# stop with "download failed: org.slf4j#slf4j-api;2.0.13!slf4j-api.jar" in every other Spark session
# of this user. Maven's settings (~/.m2/settings.xml: mirrors, proxies) still apply.
# Exit 0: the jars are there (fetched now or before); 1: no Maven, or Maven failed (the reason on stderr;
# the session then falls back to spark.jars.packages, else delta-rs).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-.venv/bin/python}

# POM-only folders that setups up to 0.16.0 left in ~/.m2 (docs/deployment.md): named, never removed here
for left in org/slf4j/slf4j-api/2.0.13 org/xerial/snappy/snappy-java/1.1.10.7; do
  dir="$HOME/.m2/repository/$left"
  if compgen -G "$dir/*.pom" >/dev/null && ! compgen -G "$dir/*.jar" >/dev/null; then
    echo "setup: $dir holds a POM without its jar (left by an earlier fragrelease setup); Spark's" \
         "spark.jars.packages stops on it: remove that folder (docs/deployment.md)" >&2
  fi
done

jars=$("$PY" -c 'from fragrelease.jobs.session import delta_jars_dir; print(delta_jars_dir())')
coord=$("$PY" -c 'from fragrelease.jobs.session import delta_jar_coordinate; print(delta_jar_coordinate())')
IFS=: read -r group artifact version <<<"$coord"
if [ -f "$jars/$artifact-$version.jar" ]; then
  exit 0
fi
if ! command -v mvn >/dev/null 2>&1; then
  echo "setup: Maven (mvn) not found: Spark will fetch Delta Lake's jars through spark.jars.packages at the" \
       "first session (needs network once), else tables are committed with delta-rs" >&2
  exit 1
fi
echo "setup: fetching Delta Lake's jars ($coord) with Maven into $jars"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
  <groupId>fragrelease.local</groupId><artifactId>delta-jars</artifactId><version>1</version><packaging>pom</packaging>
  <dependencies><dependency><groupId>$group</groupId><artifactId>$artifact</artifactId><version>$version</version></dependency></dependencies>
</project>
POM
if ! mvn -B -q -Dmaven.repo.local="$tmp/repository" -f "$tmp/pom.xml" dependency:copy-dependencies \
     -DincludeScope=runtime -DoutputDirectory="$tmp/jars" >"$tmp/mvn.log" 2>&1; then
  echo "setup: Maven could not fetch $coord (see below); Spark will try spark.jars.packages, else delta-rs" >&2
  tail -5 "$tmp/mvn.log" >&2
  exit 1
fi
spark_jars=$("$PY" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
rm -rf "$jars.tmp"
mkdir -p "$jars.tmp"
for j in "$tmp"/jars/*.jar; do
  name=$(basename "$j" .jar)
  base=$(sed -E 's/-[0-9][^-]*(-[^-]*)?$//' <<<"$name")   # artifactId without its version
  if ! compgen -G "$spark_jars/$base-[0-9]*.jar" >/dev/null; then cp "$j" "$jars.tmp/"; fi
done
rm -rf "$jars" && mv "$jars.tmp" "$jars"
echo "setup: Delta Lake jars ready ($(ls "$jars" | wc -l) jars in $jars)"
