"""The one Kafka error table: its facts, and that no other module defines an error number.

A module-level ``NAME = <int>`` where NAME is a Kafka error name is a second copy of the table; the guard fails on it.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from protocol.kafka_errors import KafkaError

ROOT = Path(__file__).resolve().parents[2]
GUARDED_PACKAGES = ("protocol", "auth", "authz", "gateway")
TABLE = ROOT / "protocol" / "kafka_errors.py"


def test_codes_and_names_are_unique_and_contiguous() -> None:
    codes = [int(e) for e in KafkaError]
    assert len(codes) == len(set(codes))  # an IntEnum would silently alias a repeated code
    assert len(KafkaError.__members__) == len(codes)
    assert sorted(codes) == list(range(-1, max(codes) + 1))  # Kafka numbers its errors without gaps


@pytest.mark.parametrize(("code", "name", "retriable", "message"), [
    (29, "TOPIC_AUTHORIZATION_FAILED", False, "Topic authorization failed."),
    (6, "NOT_LEADER_OR_FOLLOWER", True,
     "For requests intended only for the leader, this error indicates that the broker is not the current leader. "
     "For requests intended for any replica, this error indicates that the broker is not a replica of the topic "
     "partition."),
    (58, "SASL_AUTHENTICATION_FAILED", False, "SASL Authentication failed."),
    (-1, "UNKNOWN_SERVER_ERROR", False, "The server experienced an unexpected error when processing the request."),
    (0, "NONE", False, ""),
    (3, "UNKNOWN_TOPIC_OR_PARTITION", True, "This server does not host this topic-partition."),
    (100, "UNKNOWN_TOPIC_ID", True, "This server does not host this topic ID."),
    (99, "POSITION_OUT_OF_RANGE", False,
     "Requested position is not greater than or equal to zero, and less than the size of the snapshot."),
    (128, "INVALID_REGULAR_EXPRESSION", False, "The regular expression is not valid."),
])
def test_pinned_entries(code: int, name: str, retriable: bool, message: str) -> None:
    error = KafkaError(code)
    assert error.name == name
    assert error.retriable is retriable
    assert error.message == message


def test_every_member_has_a_message() -> None:
    assert all(e.message for e in KafkaError if e is not KafkaError.NONE)


def test_members_serialize_as_plain_numbers() -> None:
    # Responses and audit events must show Kafka's number, never "KafkaError.X".
    error = KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert json.dumps({"error_code": error}) == '{"error_code": 29}'
    assert (str(error), f"{error}") == ("29", "29")  # logging's %s is str()


def _error_constants(path: Path, root: Path = ROOT) -> list[str]:
    """Module-level assignments of an int (or a member) to a Kafka error name in ``path``, as "file:line NAME"."""
    found = []
    for node in ast.parse(path.read_text(encoding="utf-8"), str(path)).body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub):
            value = value.operand
        number = isinstance(value, ast.Constant) and type(value.value) is int
        alias = isinstance(value, ast.Attribute) and value.attr in KafkaError.__members__  # X = KafkaError.X
        if not (number or alias):
            continue
        names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
        found += [f"{path.relative_to(root)}:{node.lineno} {n}" for n in names if n in KafkaError.__members__]
    return found


def test_no_module_defines_its_own_error_numbers() -> None:
    modules = [p for package in GUARDED_PACKAGES for p in sorted((ROOT / package).rglob("*.py")) if p != TABLE]
    assert len(modules) > 50  # the walk found the project, not an empty folder
    assert [c for p in modules for c in _error_constants(p)] == []


def test_the_guard_finds_a_copy(tmp_path: Path) -> None:
    copy = tmp_path / "copy.py"
    copy.write_text("UNKNOWN_SERVER_ERROR = -1\nTOPIC_AUTHORIZATION_FAILED: int = 29\nNOT_AN_ERROR = 29\n"
                    "INVALID_REQUEST = KafkaError.INVALID_REQUEST\nNONE = 'none'\n")
    found = [entry.split(" ")[1] for entry in _error_constants(copy, tmp_path)]
    assert found == ["UNKNOWN_SERVER_ERROR", "TOPIC_AUTHORIZATION_FAILED", "INVALID_REQUEST"]

