"""The open-files limit: raised to the hard limit at start-up, and max.connections derived from
it when the operator set none (each client connection holds two descriptors)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

from gateway.edge.connection_limits import UNLIMITED
from gateway.ops.descriptors import (
    DESCRIPTORS_PER_CONNECTION,
    RESERVED_DESCRIPTORS,
    connections_that_fit,
    open_files_limit,
)
from tests.gateway.session.session_driver import gateway_for

ROOT = Path(__file__).resolve().parents[3]


def test_connections_leave_room_for_their_upstream_sockets_listeners_and_the_reserve() -> None:
    fits = connections_that_fit(1024, listening_sockets=4)
    assert fits is not None
    assert fits * DESCRIPTORS_PER_CONNECTION + RESERVED_DESCRIPTORS + 4 <= 1024
    assert connections_that_fit(1_048_576, 4) == (1_048_576 - RESERVED_DESCRIPTORS - 4 - 1_048_576 // 20) // 2


def test_no_open_files_limit_means_no_derived_limit_and_a_tiny_one_still_admits_one() -> None:
    assert connections_that_fit(-1, 4) is None
    assert connections_that_fit(64, 4) == 1


def test_the_soft_limit_is_raised_to_the_hard_one() -> None:
    probe = ("import resource; from gateway.ops.descriptors import raise_open_files_limit; "
             "limit = raise_open_files_limit(); "
             "print(limit.raised_from, limit.soft, resource.getrlimit(resource.RLIMIT_NOFILE)[0])")

    def low() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (100, 200))

    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                          preexec_fn=low, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.stdout.split() == ["100", "200", "200"]


def test_an_unset_max_connections_is_derived_from_the_open_files_limit(tmp_path: Path) -> None:
    gateway = gateway_for(tmp_path)
    assert gateway.limits.settings.max_connections == UNLIMITED
    gateway._fit_connections_to_descriptors()
    expected = connections_that_fit(open_files_limit().soft, 1)
    assert gateway.limits.settings.max_connections == (UNLIMITED if expected is None else expected)


def test_an_operators_max_connections_is_kept(tmp_path: Path) -> None:
    gateway = gateway_for(tmp_path, **{"max.connections": 7})
    gateway._fit_connections_to_descriptors()
    assert gateway.limits.settings.max_connections == 7
