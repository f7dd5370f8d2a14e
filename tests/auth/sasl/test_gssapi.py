"""GSSAPI against a real MIT KDC: a gssapi initiator drives the server mechanism token by token."""

from __future__ import annotations

import importlib
import struct
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import gssapi
import pytest

from auth.sasl.gssapi_mechanism import CLIENT_MESSAGE, GssapiMechanism, default_realm
from auth.sasl.kerberos_rules import KerberosShortNamer
from auth.sasl.mechanism import Challenge, Done, Failure, Outcome, SaslContext, SaslMechanismServer
from tests.kerberos import KerberosIdentity, KerberosRealm, write_shared_krb5_conf

NOW_MS = 1_700_000_000_000
NO_LAYER = 0x01


def sasl_context(server_host: str = "localhost") -> SaslContext:
    return SaslContext("SASL_PLAINTEXT", "127.0.0.1", tls=False, server_host=server_host, now_ms=lambda: NOW_MS)


def mechanism(realm: KerberosRealm, keytab: Path | None = None, **options: object) -> GssapiMechanism:
    keytab = keytab if keytab is not None else realm.identity("kafka/localhost").keytab
    return GssapiMechanism(
        short_namer=KerberosShortNamer.from_rules(realm.realm), keytab=str(keytab), **options  # type: ignore[arg-type]
    )


class Rfc4752Client:
    """The client side of RFC 4752, written from the RFC: context tokens, then the wrapped layer choice."""

    def __init__(
        self,
        ccache: str,
        target: str = "kafka@localhost",
        *,
        authzid: str = "",
        layer: int = NO_LAYER,
        mutual: bool = True,
        principal_target: bool = False,
    ) -> None:
        name_type = gssapi.NameType.kerberos_principal if principal_target else gssapi.NameType.hostbased_service
        creds = gssapi.Credentials(usage="initiate", store={"ccache": ccache})
        flags = gssapi.RequirementFlag.mutual_authentication if mutual else gssapi.RequirementFlag.integrity
        self.ctx = gssapi.SecurityContext(
            name=gssapi.Name(target, name_type), creds=creds, usage="initiate",
            mech=gssapi.MechType.kerberos, flags=flags,
        )
        self.authzid = authzid
        self.layer = layer
        self.offer: bytes | None = None

    def first(self) -> bytes:
        token: bytes = self.ctx.step()
        return token

    def respond(self, challenge: bytes) -> bytes:
        if not self.ctx.complete:
            return self.ctx.step(challenge) or b""
        self.offer = self.ctx.unwrap(challenge).message
        reply = struct.pack(">B3s", self.layer, b"\0\0\0") + self.authzid.encode()
        wrapped: bytes = self.ctx.wrap(reply, False).message
        return wrapped


def run(server: SaslMechanismServer, client: Rfc4752Client, max_steps: int = 6) -> Outcome:
    token = client.first()
    for _ in range(max_steps):
        outcome = server.evaluate(token)
        if not isinstance(outcome, Challenge):
            return outcome
        token = client.respond(outcome.data)
    raise AssertionError("exchange did not finish")


def failure(outcome: Outcome) -> Failure:
    assert isinstance(outcome, Failure), outcome
    assert outcome.client_message == CLIENT_MESSAGE  # never the GSS detail
    return outcome


@pytest.fixture(scope="module")
def alice(kerberos_realm: KerberosRealm) -> KerberosIdentity:
    return kerberos_realm.add_user("alice")


@pytest.fixture(autouse=True)
def krb5_env(kerberos_realm: KerberosRealm, alice: KerberosIdentity, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in kerberos_realm.env(client=alice).items():
        monkeypatch.setenv(key, value)


# -- success -------------------------------------------------------------------------------------


def test_kerberos_client_authenticates_as_its_full_principal(
    kerberos_realm: KerberosRealm, alice: KerberosIdentity
) -> None:
    mech = mechanism(kerberos_realm)
    outcome = run(mech.create(sasl_context()), Rfc4752Client(alice.ccache_name))
    assert isinstance(outcome, Done)
    assert outcome.authorization_id == "alice@KSGATE.TEST"
    assert outcome.final == b""
    assert mech.short_name(outcome.authorization_id) == "alice"
    assert mech.name == "GSSAPI"


def test_server_offers_only_no_security_layer_with_zero_max_size(
    kerberos_realm: KerberosRealm, alice: KerberosIdentity
) -> None:
    client = Rfc4752Client(alice.ccache_name)
    assert isinstance(run(mechanism(kerberos_realm).create(sasl_context()), client), Done)
    assert client.offer == b"\x01\x00\x00\x00"


def test_mutual_authentication_reply_is_sent_before_the_offer(
    kerberos_realm: KerberosRealm, alice: KerberosIdentity
) -> None:
    client = Rfc4752Client(alice.ccache_name, mutual=True)
    server = mechanism(kerberos_realm).create(sasl_context())
    ap_rep = server.evaluate(client.first())
    assert isinstance(ap_rep, Challenge)
    assert client.respond(ap_rep.data) == b""  # the client's context is now complete
    assert client.ctx.complete


def test_a_non_empty_reply_to_the_final_context_token_fails(
    kerberos_realm: KerberosRealm, alice: KerberosIdentity
) -> None:
    client = Rfc4752Client(alice.ccache_name, mutual=True)
    server = mechanism(kerberos_realm).create(sasl_context())
    ap_rep = server.evaluate(client.first())
    assert isinstance(ap_rep, Challenge)
    client.respond(ap_rep.data)
    assert "expected an empty response" in failure(server.evaluate(b"\x00")).reason


def test_without_mutual_authentication_the_first_challenge_is_the_offer(
    kerberos_realm: KerberosRealm, alice: KerberosIdentity
) -> None:
    client = Rfc4752Client(alice.ccache_name, mutual=False)
    server = mechanism(kerberos_realm).create(sasl_context())
    offer = server.evaluate(client.first())
    assert isinstance(offer, Challenge)
    assert client.ctx.complete
    assert isinstance(server.evaluate(client.respond(offer.data)), Done)
    assert client.offer == b"\x01\x00\x00\x00"


def test_credential_expiry_is_the_ticket_end_time(kerberos_realm: KerberosRealm, alice: KerberosIdentity) -> None:
    client = Rfc4752Client(alice.ccache_name)
    outcome = run(mechanism(kerberos_realm).create(sasl_context()), client)
    assert isinstance(outcome, Done)
    assert outcome.credential_expiry_ms is not None
    ticket_left_ms = client.ctx.lifetime * 1000  # the initiator's view: ticket end minus now
    # MIT adds its clock-skew allowance (5 minutes by default) to an acceptor's lifetime.
    assert ticket_left_ms - 2_000 <= outcome.credential_expiry_ms - NOW_MS <= ticket_left_ms + 300_000 + 2_000
    assert ticket_left_ms > 9 * 3600 * 1000  # the realm issues 10 h tickets


def test_credential_expiry_can_be_left_to_connections_max_reauth(
    kerberos_realm: KerberosRealm, alice: KerberosIdentity
) -> None:
    mech = mechanism(kerberos_realm, ticket_bounds_session=False)
    outcome = run(mech.create(sasl_context()), Rfc4752Client(alice.ccache_name))
    assert isinstance(outcome, Done)
    assert outcome.credential_expiry_ms is None


def test_default_realm_comes_from_the_krb5_configuration(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert default_realm() == "KSGATE.TEST"
    realmless = tmp_path / "krb5.conf"
    realmless.write_text("[libdefaults]\n    dns_lookup_realm = false\n")
    monkeypatch.setenv("KRB5_CONFIG", str(realmless))
    assert default_realm() == ""


# -- authorization id ----------------------------------------------------------------------------


@pytest.mark.parametrize("authzid", ["", "alice@KSGATE.TEST"])
def test_empty_or_own_authzid_is_accepted_even_when_matching_is_required(
    kerberos_realm: KerberosRealm, alice: KerberosIdentity, authzid: str
) -> None:
    mech = mechanism(kerberos_realm, require_matching_authzid=True)
    outcome = run(mech.create(sasl_context()), Rfc4752Client(alice.ccache_name, authzid=authzid))
    assert isinstance(outcome, Done)
    assert outcome.authorization_id == "alice@KSGATE.TEST"


def test_another_authzid_is_ignored_and_the_principal_is_authenticated_like_kafka(
    kerberos_realm: KerberosRealm, alice: KerberosIdentity
) -> None:
    outcome = run(
        mechanism(kerberos_realm).create(sasl_context()), Rfc4752Client(alice.ccache_name, authzid="bob@KSGATE.TEST")
    )
    assert isinstance(outcome, Done)
    assert outcome.authorization_id == "alice@KSGATE.TEST"


def test_authzid_mismatch_fails_when_matching_is_required(
    kerberos_realm: KerberosRealm, alice: KerberosIdentity
) -> None:
    mech = mechanism(kerberos_realm, require_matching_authzid=True)
    outcome = run(mech.create(sasl_context()), Rfc4752Client(alice.ccache_name, authzid="bob@KSGATE.TEST"))
    assert "may not act as authorization id 'bob@KSGATE.TEST'" in failure(outcome).reason


# -- security layer ------------------------------------------------------------------------------


@pytest.mark.parametrize("layer", [0x00, 0x02, 0x04, 0x07])
def test_choosing_a_layer_other_than_none_fails(
    kerberos_realm: KerberosRealm, alice: KerberosIdentity, layer: int
) -> None:
    outcome = run(mechanism(kerberos_realm).create(sasl_context()), Rfc4752Client(alice.ccache_name, layer=layer))
    assert "only 'no security layer' is offered" in failure(outcome).reason


def test_a_layer_reply_shorter_than_four_bytes_fails(kerberos_realm: KerberosRealm, alice: KerberosIdentity) -> None:
    client = Rfc4752Client(alice.ccache_name, mutual=False)
    server = mechanism(kerberos_realm).create(sasl_context())
    offer = server.evaluate(client.first())
    assert isinstance(offer, Challenge)
    outcome = server.evaluate(client.ctx.wrap(b"\x01\x00", False).message)
    assert "expected at least 4" in failure(outcome).reason


def test_an_unwrapped_layer_reply_fails_with_the_gss_error(
    kerberos_realm: KerberosRealm, alice: KerberosIdentity
) -> None:
    client = Rfc4752Client(alice.ccache_name, mutual=False)
    server = mechanism(kerberos_realm).create(sasl_context())
    assert isinstance(server.evaluate(client.first()), Challenge)
    assert "GSSAPI awaiting_layer failed" in failure(server.evaluate(b"\x01\x00\x00\x00")).reason


def test_a_finished_exchange_accepts_no_more_tokens(kerberos_realm: KerberosRealm, alice: KerberosIdentity) -> None:
    server = mechanism(kerberos_realm).create(sasl_context())
    assert isinstance(run(server, Rfc4752Client(alice.ccache_name)), Done)
    assert "already finished" in failure(server.evaluate(b"")).reason


# -- bad tokens and wrong services ---------------------------------------------------------------


@pytest.mark.parametrize("token", [b"", b"not a kerberos token", b"\x60\x82\x02\x00" + b"\x00" * 16])
def test_a_malformed_first_token_fails_with_the_gss_error(kerberos_realm: KerberosRealm, token: bytes) -> None:
    reason = failure(mechanism(kerberos_realm).create(sasl_context()).evaluate(token)).reason
    assert reason.startswith("GSSAPI accepting failed: Major")


def test_a_replayed_token_fails_as_a_retriable_replay(kerberos_realm: KerberosRealm, alice: KerberosIdentity) -> None:
    first = Rfc4752Client(alice.ccache_name).first()
    mech = mechanism(kerberos_realm)
    assert isinstance(mech.create(sasl_context()).evaluate(first), Challenge)
    reason = failure(mech.create(sasl_context()).evaluate(first)).reason
    assert "krb5 error 34, retriable" in reason


@pytest.fixture(scope="module")
def shared_keytab(kerberos_realm: KerberosRealm, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A keytab holding kafka/localhost and other/localhost, as a host with several services has."""
    kerberos_realm.add_service("other", "localhost")
    kerberos_realm.add_service("kafka", "otherhost")
    keytab = tmp_path_factory.mktemp("keytab") / "services.keytab"
    return kerberos_realm.export_keytab(keytab, "kafka/localhost", "other/localhost", "kafka/otherhost")


@pytest.mark.parametrize("target", ["other@localhost", "kafka@otherhost"])
def test_a_ticket_for_another_service_fails_even_if_its_key_is_in_the_keytab(
    kerberos_realm: KerberosRealm, alice: KerberosIdentity, shared_keytab: Path, target: str
) -> None:
    mech = mechanism(kerberos_realm, keytab=shared_keytab)
    outcome = run(mech.create(sasl_context()), Rfc4752Client(alice.ccache_name, target))
    assert "GSSAPI accepting failed" in failure(outcome).reason


def test_a_ticket_for_a_service_missing_from_the_keytab_fails(
    kerberos_realm: KerberosRealm, alice: KerberosIdentity
) -> None:
    kerberos_realm.add_service("kafka", "elsewhere")  # known to the KDC, but not in our keytab
    outcome = run(mechanism(kerberos_realm).create(sasl_context()), Rfc4752Client(alice.ccache_name, "kafka@elsewhere"))
    assert "GSSAPI accepting failed" in failure(outcome).reason


def test_acceptor_follows_the_listener_host_when_server_host_is_unset(
    kerberos_realm: KerberosRealm, alice: KerberosIdentity, shared_keytab: Path
) -> None:
    mech = mechanism(kerberos_realm, keytab=shared_keytab)
    outcome = run(mech.create(sasl_context("otherhost")), Rfc4752Client(alice.ccache_name, "kafka@otherhost"))
    assert isinstance(outcome, Done)
    pinned = mechanism(kerberos_realm, keytab=shared_keytab, server_host="localhost")
    outcome = run(pinned.create(sasl_context("otherhost")), Rfc4752Client(alice.ccache_name, "kafka@otherhost"))
    assert isinstance(outcome, Failure)


def test_missing_acceptor_keys_fail_without_contacting_the_client(
    kerberos_realm: KerberosRealm, tmp_path: Path
) -> None:
    mech = mechanism(kerberos_realm, keytab=tmp_path / "absent.keytab")
    reason = failure(mech.create(sasl_context()).evaluate(b"anything")).reason
    assert "no acceptor credentials for kafka@localhost" in reason


# -- other realms and clocks ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def other_realm(kerberos_realm: KerberosRealm) -> Iterator[KerberosRealm]:
    with KerberosRealm("OTHER.TEST") as other:
        other.add_service("kafka", "localhost")
        other.add_user("mallory")
        kerberos_realm.trust(other)
        yield other


def test_a_ticket_issued_by_another_realm_for_its_own_kafka_fails(
    kerberos_realm: KerberosRealm, other_realm: KerberosRealm, monkeypatch: pytest.MonkeyPatch
) -> None:
    mallory = other_realm.identity("mallory")
    other_realm.get_service_ticket(mallory, "kafka/localhost")
    client = Rfc4752Client(mallory.ccache_name, "kafka/localhost@OTHER.TEST", principal_target=True)
    outcome = run(mechanism(kerberos_realm).create(sasl_context()), client)
    assert "GSSAPI accepting failed" in failure(outcome).reason


def test_a_trusted_foreign_realm_user_needs_a_rule_for_its_realm(
    kerberos_realm: KerberosRealm, other_realm: KerberosRealm, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    conf = write_shared_krb5_conf(tmp_path / "krb5.conf", kerberos_realm, other_realm)
    monkeypatch.setenv("KRB5_CONFIG", str(conf))
    mallory = other_realm.identity("mallory")
    with_default = mechanism(kerberos_realm)
    outcome = run(with_default.create(sasl_context()), Rfc4752Client(mallory.ccache_name))
    assert "mallory@OTHER.TEST: No rules apply" in failure(outcome).reason

    namer = KerberosShortNamer.from_rules(kerberos_realm.realm, "RULE:[1:$1@$0](.*@OTHER.TEST)s/@.*//,DEFAULT")
    with_rule = GssapiMechanism(short_namer=namer, keytab=str(kerberos_realm.identity("kafka/localhost").keytab))
    outcome = run(with_rule.create(sasl_context()), Rfc4752Client(mallory.ccache_name))
    assert isinstance(outcome, Done)
    assert outcome.authorization_id == "mallory@OTHER.TEST"
    assert with_rule.short_name(outcome.authorization_id) == "mallory"


def test_a_ticket_from_a_kdc_clock_hours_behind_fails_on_skew() -> None:
    # A client cannot present an expired ticket (its library refuses and re-fetches first),
    # so the time check the acceptor can see is a ticket and authenticator from a wrong clock.
    with KerberosRealm("SKEW.TEST", time_offset_s=-7200) as skewed:
        service = skewed.add_service("kafka", "localhost")
        bob = skewed.add_principal("bob")
        skewed.kinit(bob, lifetime="1h")
        skewed.get_service_ticket(bob, "kafka/localhost")
        mech = GssapiMechanism(short_namer=KerberosShortNamer.from_rules("SKEW.TEST"), keytab=str(service.keytab))
        client = Rfc4752Client(bob.ccache_name, "kafka/localhost@SKEW.TEST", principal_target=True)
        reason = failure(run(mech.create(sasl_context()), client)).reason
    assert "Clock skew too great" in reason


# -- kafka-python's client ----------------------------------------------------------------------


def kafka_python_gssapi_module() -> ModuleType:
    # kafka-python 3.x keeps its SASL mechanisms in kafka.net.sasl, 2.1-2.x in kafka.sasl;
    # 2.0 had GSSAPI inline in the connection, with nothing to drive without a socket.
    for name in ("kafka.net.sasl.gssapi", "kafka.sasl.gssapi"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    pytest.skip("this kafka-python has no separable GSSAPI client (added in 2.1)")


def test_kafka_python_gssapi_client_completes_against_the_server(
    kerberos_realm: KerberosRealm, alice: KerberosIdentity
) -> None:
    sasl_gssapi = kafka_python_gssapi_module()
    client = sasl_gssapi.SaslMechanismGSSAPI(sasl_kerberos_service_name="kafka", host="localhost")
    server = mechanism(kerberos_realm).create(sasl_context())
    outcome: Outcome | None = None
    for _ in range(6):
        outcome = server.evaluate(client.auth_bytes())
        if not isinstance(outcome, Challenge):
            break
        client.receive(outcome.data)
    # kafka-python sends the *service* name as authorization id; Kafka ignores it, and so do we.
    assert isinstance(outcome, Done)
    assert outcome.authorization_id == "alice@KSGATE.TEST"
    assert client.is_done() and client.is_authenticated()


def test_acceptor_credentials_are_checked_before_any_client_comes(
        kerberos_realm: KerberosRealm, alice: KerberosIdentity, krb5_env: None, tmp_path: Path) -> None:
    """Start-up refuses a keytab that cannot serve (as Kafka's Kerberos login fails), naming what is missing."""
    from auth.sasl.gssapi_mechanism import acceptor_problem

    assert acceptor_problem(mechanism(kerberos_realm, server_host="localhost")) is None
    assert acceptor_problem(mechanism(kerberos_realm)) is None  # any key: the host is the one clients dial
    wrong = acceptor_problem(mechanism(kerberos_realm, alice.keytab, server_host="localhost"))
    assert wrong is not None and wrong.startswith(f"no key for kafka/localhost in {alice.keytab}: ")
    missing = tmp_path / "absent.keytab"
    assert acceptor_problem(mechanism(kerberos_realm, missing)) == f"the keytab {missing} does not exist"
    assert acceptor_problem(mechanism(kerberos_realm, Path(f"FILE:{missing}"))) == \
        f"the keytab {missing} does not exist"
