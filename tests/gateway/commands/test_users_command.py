"""``ksgate users``: add, list and delete through run_users_command; passwords never come from argv."""

from __future__ import annotations

import argparse
import base64
import io
import json
from pathlib import Path

import pytest

import auth.sasl.plain
import gateway.stores.file_users
from gateway.commands.users import add_users_parser, run_users_command
from gateway.stores.file_users import FileCredentialStore

PASSWORD = "p@ss word, with spaces"


@pytest.fixture(autouse=True)
def fast_plain_hashes(monkeypatch: pytest.MonkeyPatch) -> None:
    real = auth.sasl.plain.plain_credential
    monkeypatch.setattr(gateway.stores.file_users, "plain_credential",
                        lambda password: real(password, iterations=1000))


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="ksgate")
    add_users_parser(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(list(argv))


def run(*argv: str) -> int:
    args = parse(*argv)
    assert args.func is run_users_command
    result: int = args.func(args)
    return result


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "users.json"


@pytest.fixture
def password_file(tmp_path: Path) -> Path:
    path = tmp_path / "password.txt"
    path.write_text(PASSWORD + "\n")
    return path


def test_add_list_delete_round_trip(store_path: Path, password_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("users", "add", "alice", "--password-file", str(password_file), "--store", str(store_path)) == 0
    assert run("users", "add", "bob", "--password-file", str(password_file), "--mechanism", "SCRAM-SHA-512",
               "--iterations", "8192", "--store", str(store_path)) == 0
    capsys.readouterr()

    assert run("users", "list", "--store", str(store_path)) == 0
    listing = capsys.readouterr().out
    assert listing == "alice\tPLAIN, SCRAM-SHA-256, SCRAM-SHA-512\nbob\tSCRAM-SHA-512\n"

    assert run("users", "delete", "alice", "--store", str(store_path)) == 0
    assert FileCredentialStore(store_path).users() == ["bob"]
    assert run("users", "delete", "alice", "--store", str(store_path)) == 1
    assert "no user 'alice'" in capsys.readouterr().err


def test_password_file_trailing_newline_is_not_part_of_the_password(store_path: Path, password_file: Path) -> None:
    run("users", "add", "alice", "--password-file", str(password_file), "--mechanism", "PLAIN",
        "--store", str(store_path))
    from auth.sasl.mechanism import Done, SaslContext, run_inline
    from auth.sasl.plain import PlainMechanism

    server = PlainMechanism(FileCredentialStore(store_path)).create(SaslContext("L", "h", True))
    assert run_inline(server.evaluate(f"\0alice\0{PASSWORD}".encode())) == Done(authorization_id="alice")


def test_list_never_prints_key_material_or_the_password(store_path: Path, password_file: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    run("users", "add", "alice", "--password-file", str(password_file), "--store", str(store_path))
    run("users", "list", "--store", str(store_path))
    output = capsys.readouterr()
    printed = output.out + output.err
    assert PASSWORD not in printed
    for records in json.loads(store_path.read_text())["users"]["alice"].values():
        for key in ("salt", "hash", "stored_key", "server_key"):
            if key in records:
                assert records[key] not in printed
                assert records[key][:12] not in printed
    assert base64.b64encode(PASSWORD.encode()).decode() not in store_path.read_text()


def test_password_from_stdin(store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(PASSWORD + "\n"))
    assert run("users", "add", "alice", "--password-stdin", "--mechanism", "SCRAM-SHA-256",
               "--store", str(store_path)) == 0
    assert FileCredentialStore(store_path).mechanisms("alice") == ["SCRAM-SHA-256"]


def test_without_a_password_source_and_no_terminal_the_command_fails(
        store_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert run("users", "add", "alice", "--store", str(store_path)) == 1
    assert "--password-file" in capsys.readouterr().err
    assert not store_path.exists()


def test_interactive_prompt_requires_the_password_twice(store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    answers = iter([PASSWORD, "typo"])
    monkeypatch.setattr("sys.stdin", Tty())
    monkeypatch.setattr("getpass.getpass", lambda prompt="": next(answers))
    assert run("users", "add", "alice", "--store", str(store_path)) == 1
    answers = iter([PASSWORD, PASSWORD])
    assert run("users", "add", "alice", "--store", str(store_path)) == 0


def test_empty_password_file_is_refused(store_path: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_text("\n")
    assert run("users", "add", "alice", "--password-file", str(empty), "--store", str(store_path)) == 1


def test_invalid_iterations_are_refused(store_path: Path, password_file: Path) -> None:
    assert run("users", "add", "alice", "--password-file", str(password_file), "--iterations", "100",
               "--store", str(store_path)) == 1
    assert not store_path.exists()


@pytest.mark.parametrize("argv", [
    ["users", "add", "alice", "--password", "secret"],
    ["users", "add", "alice", "secret"],
    ["users", "add", "alice", "--password-file", "f", "--password-stdin"],
    ["users", "add", "alice", "--mechanism", "SCRAM-SHA-1"],
])
def test_argv_cannot_carry_a_password_or_bad_options(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        parse(*argv)


def test_store_defaults_to_ksgate_users_json() -> None:
    assert parse("users", "list").store == "./ksgate-users.json"
