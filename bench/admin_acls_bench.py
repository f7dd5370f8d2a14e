"""What one large CreateAcls (and the DeleteAcls that removes the same ACLs) costs the gateway.

A benchmark, not a test.  It starts an embedded Tansu broker and an in-process gateway
(tests/harness.py: PLAINTEXT, StandardAuthorizer, no ACL on the cluster so ALTER is
allowed) with the FILE store, or with ``--store KAFKA`` the replicated store (a security
topic on that Tansu).  It then sends, over the raw wire, one CreateAcls v3 request with
``--acls`` creations (distinct topics, one principal), waits for the answer, checks that
every item succeeded, and does the same with one DeleteAcls whose filters name those ACLs
exactly.  Printed per request: wall time and this process's CPU time over it (the gateway
runs in this process; the raw client's share is negligible).

    .venv/bin/python bench/admin_acls_bench.py [--acls 5000] [--store FILE|KAFKA] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gateway.commands.embedded_broker import EmbeddedBroker  # noqa: E402
from protocol.api_keys import ApiKey  # noqa: E402
from tests.harness import GatewayThread  # noqa: E402
from tests.wire_client import WireClient, request_frame  # noqa: E402

TOPIC, LITERAL, ALLOW, READ = 2, 3, 3, 3  # ResourceType, PatternType, AclPermissionType, AclOperation codes


def _acl(i: int) -> dict[str, Any]:
    return {"resource_type": TOPIC, "resource_name": f"bench-topic-{i}", "resource_pattern_type": LITERAL,
            "principal": "User:bench", "host": "*", "operation": READ, "permission_type": ALLOW}


def _filter(i: int) -> dict[str, Any]:
    return {"resource_type_filter": TOPIC, "resource_name_filter": f"bench-topic-{i}",
            "pattern_type_filter": LITERAL, "principal_filter": "User:bench", "host_filter": "*",
            "operation": READ, "permission_type": ALLOW}


def _timed(client: WireClient, api_key: int, version: int, body: dict[str, Any]) -> tuple[dict[str, Any], float, float]:
    frame = request_frame(api_key, version, 1, body)
    wall, cpu = time.perf_counter(), time.process_time()
    client.send(frame)
    response = client.read_response(api_key, version)[1]
    return response, time.perf_counter() - wall, time.process_time() - cpu


def run(acls: int, store: str) -> dict[str, Any]:
    with EmbeddedBroker() as broker:
        extra: dict[str, Any] = {"log.level": "WARNING"}
        if store == "KAFKA":
            extra.update({"ksgate.security.store": "KAFKA",
                          "ksgate.security.store.topic": f"_ksgate_bench_{uuid.uuid4().hex[:8]}"})
        gateway = GatewayThread(broker.bootstrap, extra).start()
        try:
            client = WireClient(gateway.bootstrap, timeout_s=600)
            created, create_wall, create_cpu = _timed(
                client, ApiKey.CREATE_ACLS, 3, {"creations": [_acl(i) for i in range(acls)]})
            failed = [r for r in created["results"] if r["error_code"] != 0]
            if failed:
                raise SystemExit(f"{len(failed)} creations failed, first: {failed[0]}")
            deleted, delete_wall, delete_cpu = _timed(
                client, ApiKey.DELETE_ACLS, 3, {"filters": [_filter(i) for i in range(acls)]})
            removed = sum(len(r["matching_acls"]) for r in deleted["filter_results"])
            if removed != acls:
                raise SystemExit(f"DeleteAcls removed {removed} ACLs, expected {acls}")
            client.close()
        finally:
            gateway.stop()
    return {"store": store, "acls": acls, "create_wall_s": create_wall, "create_cpu_s": create_cpu,
            "delete_wall_s": delete_wall, "delete_cpu_s": delete_cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--acls", type=int, default=5000)
    parser.add_argument("--store", choices=("FILE", "KAFKA"), default="FILE")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.acls, args.store)
    print(f"store={result['store']} acls={result['acls']}")
    print(f"  CreateAcls: {result['create_wall_s']:.2f} s wall, {result['create_cpu_s']:.2f} s CPU")
    print(f"  DeleteAcls: {result['delete_wall_s']:.2f} s wall, {result['delete_cpu_s']:.2f} s CPU")
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
