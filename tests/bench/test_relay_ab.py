"""bench/anchors/relay_ab.py says which gateway runs compiled code by the extension files it maps from the tree's
own packages: a venv inside the checkout maps its own (pydantic, uvloop) whatever the gateway's code is."""

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
