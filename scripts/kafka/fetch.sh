#!/usr/bin/env bash
# Resolves the reference Apache Kafka (scripts/kafka/pom.xml) from Maven Central into a cache and prints the
# folder holding its jars (the classpath is that folder's *.jar).  Installs Java 17 and Maven from Debian when
# missing (as root).  Cache: $REFERENCE_KAFKA_CACHE, default ~/.cache/ksgate/kafka; a second run is offline.
# `fetch.sh clients-3` does the same for a 3.x kafka-clients alone (clients-3.pom.xml) and prints its folder.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${REFERENCE_KAFKA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ksgate/kafka}
pom="$here/pom.xml"; name=kafka
if [ "${1:-}" = clients-3 ]; then pom="$here/clients-3.pom.xml"; name=kafka-clients; fi
version=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$pom")
lib="$cache/$name-$version/lib"
stamp="$lib/.pom.sha256"
want=$(sha256sum "$pom" | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "$lib"; exit 0
fi
need=()
command -v java >/dev/null || need+=(openjdk-17-jre-headless)
command -v mvn >/dev/null || need+=(maven)
if [ "${#need[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  else
    echo "scripts/kafka/fetch.sh: missing ${need[*]} (run as root to install them)" >&2; exit 1
  fi
fi
rm -rf "$lib"; mkdir -p "$lib"
mvn -q -B -Dstyle.color=never -f "$pom" -Dmaven.repo.local="$cache/m2" \
  dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$lib" >&2
echo "$want" > "$stamp"
echo "$lib"
