#!/usr/bin/env bash
# Undoes what scripts/compose-test.sh installs as root, so that its next run meets a fresh machine: podman's images,
# containers, volumes and networks in the script's own store, the netavark firewall chains, the script's state
# directories and the Debian packages it installs.  Java and Maven (scripts/kafka/fetch.sh, also scripts/test.sh's)
# and ca-certificates stay.  Usage (root): bash scripts/compose-purge.sh
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "compose-purge: run as root" >&2; exit 1; }
STATE=${KSGATE_COMPOSE_HOME:-/var/cache/ksgate-compose}
RUNTIME=/run/ksgate-compose
PACKAGES=(podman runc catatonit netavark aardvark-dns iptables debootstrap)
if command -v podman >/dev/null && [ -f "$STATE/containers.conf" ]; then
  CONTAINERS_CONF="$STATE/containers.conf" CONTAINERS_STORAGE_CONF="$STATE/storage.conf" \
    CONTAINERS_REGISTRIES_CONF="$STATE/registries.conf" podman system reset --force >/dev/null 2>&1 || true
fi
if command -v iptables >/dev/null; then  # netavark leaves its (empty) chains behind
  for table in nat filter mangle; do
    iptables -t "$table" -S 2>/dev/null | grep -E '^-A .*NETAVARK' | sed 's/^-A/-D/' \
      | while read -r rule; do eval "iptables -t $table $rule" || true; done || true  # grep: none left
    iptables -t "$table" -S 2>/dev/null | sed -n 's/^-N \(NETAVARK.*\)/\1/p' \
      | while read -r chain; do iptables -t "$table" -F "$chain"; iptables -t "$table" -X "$chain" || true; done || true
  done
fi
rm -rf "$STATE" "$RUNTIME"
installed=()
for pkg in "${PACKAGES[@]}"; do
  [ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" = "install ok installed" ] && installed+=("$pkg")
done
if [ "${#installed[@]}" -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq --autoremove "${installed[@]}" >/dev/null
fi
rm -rf /etc/containers /var/lib/containers /run/containers /run/libpod
echo "compose-purge: removed ${installed[*]:-no packages}; podman's store, $STATE and $RUNTIME are gone"
