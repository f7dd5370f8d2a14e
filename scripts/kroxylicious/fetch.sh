#!/usr/bin/env bash
# Resolves Kroxylicious (scripts/kroxylicious/pom.xml) from Maven Central into a cache and prints the folder
# holding its jars (the classpath is that folder's *.jar), as scripts/kafka/fetch.sh does for Kafka.  Used by
# bench/anchors/kroxylicious.py only.  Cache: $KROXYLICIOUS_CACHE, default ~/.cache/ksgate/kroxylicious.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${KROXYLICIOUS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ksgate/kroxylicious}
pom="$here/pom.xml"
version=$(sed -n 's:.*<kroxylicious.version>\(.*\)</kroxylicious.version>.*:\1:p' "$pom")
lib="$cache/kroxylicious-$version/lib"
stamp="$lib/.pom.sha256"
want=$(sha256sum "$pom" | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "$lib"; exit 0
fi
for tool in java mvn; do
  command -v "$tool" >/dev/null || { echo "scripts/kroxylicious/fetch.sh: $tool missing (scripts/kafka/fetch.sh installs both)" >&2; exit 1; }
done
rm -rf "$lib"; mkdir -p "$lib"
mvn -q -B -Dstyle.color=never -f "$pom" -Dmaven.repo.local="$cache/m2" \
  dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$lib" >&2
echo "$want" > "$stamp"
echo "$lib"
