"""The A/B benches' own logic.  bench/anchors/relay_ab.py says which gateway runs compiled code by the extension files
it maps from the tree's own packages: a venv inside the checkout maps its own (pydantic, uvloop) whatever the gateway's
code is.  bench/anchors/authz_ab.py's sign test, and its SASL-only path: the ksgate path less the authorizer."""

from __future__ import annotations

from pathlib import Path

from bench.anchors.relay_ab import compiled_in

TREE = Path("/work/main")


def _mapped(*paths: str) -> str:
    """A /proc/PID/maps with each path mapped twice (text and data), as the loader does, and an anonymous map."""
    lines = [f"7f00000{i}000-7f00000{i}fff r-xp 00000000 08:01 {100 + i} {path}" for i, path in enumerate(paths)]
    return "\n".join([*lines, *lines, "7ffd0000-7ffd1000 rw-p 00000000 00:00 0 [stack]"]) + "\n"


def test_a_venv_inside_the_checkout_is_not_compiled_code_of_the_tree() -> None:
    maps = _mapped("/work/main/.venv/lib/python3.11/site-packages/uvloop/loop.cpython-311-x86_64-linux-gnu.so",
                   "/work/main/.venv/lib/python3.11/site-packages/pydantic_core/_pydantic_core.so")
    assert compiled_in(maps, TREE) == 0


def test_each_extension_file_of_the_tree_s_packages_counts_once() -> None:
    maps = _mapped("/work/main/protocol/codec.cpython-311-x86_64-linux-gnu.so",
                   "/work/main/gateway/session/session.cpython-311-x86_64-linux-gnu.so",
                   "/work/main/.venv/lib/python3.11/site-packages/uvloop/loop.cpython-311-x86_64-linux-gnu.so",
                   "/work/main-copy/protocol/codec.cpython-311-x86_64-linux-gnu.so")
    assert compiled_in(maps, TREE) == 2


# --- bench/anchors/authz_ab.py: ksgate-ssl against ksgate in alternating blocks -----------------------------------

def test_the_sign_test_is_two_sided_and_exact() -> None:
    from bench.anchors.authz_ab import sign_test_p

    assert sign_test_p(2, 9) == sign_test_p(9, 2) == 2 * (1 + 11 + 55) / 2**11  # 0.065
    assert sign_test_p(0, 6) == 2 / 2**6
    assert sign_test_p(7, 6) == sign_test_p(0, 0) == 1.0


def test_ksgate_sasl_is_the_ksgate_path_without_its_authorizer(tmp_path: Path) -> None:
    from auth.cert_tools import write_tls_material
    from bench.anchors.authz_ab import gateway_keys

    tls, nodes = write_tls_material(tmp_path / "tls"), {"node.id.min": 1, "node.id.max": 1}
    keys = {}
    for path in ("ksgate-ssl", "ksgate", "ksgate-sasl"):
        (tmp_path / path).mkdir()
        keys[path] = gateway_keys(path, tmp_path / path, tls, "secret", nodes)
    assert keys["ksgate-ssl"][0] == "SSL" and keys["ksgate-ssl"][1]["authorizer.class.name"] == ""
    protocol, authorized = keys["ksgate"]
    assert protocol == "SASL_SSL" and authorized["authorizer.class.name"] == "StandardAuthorizer"
    protocol, sasl_only = keys["ksgate-sasl"]
    assert protocol == "SASL_SSL" and sasl_only["authorizer.class.name"] == ""
    assert "ksgate.acl.file" not in sasl_only and "allow.everyone.if.no.acl.found" not in sasl_only
    assert {k: v for k, v in sasl_only.items() if k not in ("authorizer.class.name", "ksgate.credentials.file")} \
        == {k: v for k, v in authorized.items() if k not in ("authorizer.class.name", "ksgate.credentials.file",
                                                               "ksgate.acl.file", "allow.everyone.if.no.acl.found")}
