"""Topic protections that no policy can skip: reserved topics and Kafka's topic-name rules.

Before any policy runs, the topics a request names (found through the schemas' ``entity=``
annotations, by name or by id) are inspected.  A request naming a reserved topic (the
security store's) or an illegal name is authorized without cluster-level shortcuts, so the
policy decides every topic on its own and the view denies those; after the policy, what
would be relayed is inspected again and refused outright if it still names one.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from auth.principal import KafkaPrincipal
from authz.model import AclOperation, ResourceType
from authz.request_policy import Action, Answer, Body, Refuse, Relay, Rewrite, Verdict
from protocol.entities.topics import TopicRef, drop_topics, elements_naming, names_and_ids, names_topics
from protocol.kafka_errors import KafkaError
from protocol.schema import MessageSpec

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL = re.compile(rf"[a-zA-Z0-9._-]{{1,{MAX_TOPIC_NAME_LENGTH}}}")
_DOTS = (".", "..")  # legal characters, illegal names


@dataclass(slots=True, frozen=True)
class TopicRules:
    """How Kafka's handler of one API treats topic names: each API's route carries its own
    (gateway/session/routes.py), and the guard follows it."""

    # Kafka validates the name itself (Topic.validate): an illegal one gets INVALID_TOPIC_EXCEPTION.
    # Everywhere else an illegal name is a topic that cannot exist: UNKNOWN_TOPIC_OR_PARTITION.
    validates_names: bool = False
    # The answer names exactly the topics the request named (the data APIs), so it never needs
    # scrubbing of a reserved topic, and its bytes are relayed undecoded (the hot path).
    answers_only_what_was_asked: bool = False

    def illegal_topic_error(self) -> int:
        return KafkaError.INVALID_TOPIC_EXCEPTION if self.validates_names else KafkaError.UNKNOWN_TOPIC_OR_PARTITION


def topic_name_problem(name: str) -> str | None:
    """Kafka's Topic.validate reason, or None for a legal topic name."""
    if _LEGAL.fullmatch(name) and name not in _DOTS:
        return None  # the common case, checked for every name of every request
    if not name:
        return "the empty string is not allowed"
    if name in (".", ".."):
        return f"'{name}' is not allowed"
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"the length of '{name}' is longer than the max allowed length {MAX_TOPIC_NAME_LENGTH}"
    if not all(c.isascii() and (c.isalnum() or c in "._-") for c in name):
        return f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None


@dataclass(slots=True, frozen=True)
class TopicFindings:
    """What the pre-pass found among the topics a request names."""

    reserved: frozenset[str] = frozenset()
    illegal: frozenset[str] = frozenset()

    @property
    def suspicious(self) -> bool:
        """Cluster-level shortcuts are off for this request: each topic is decided on its own."""
        return bool(self.reserved or self.illegal)


NOTHING_FOUND = TopicFindings()


def inspect_topics(spec: MessageSpec, version: int, body: Body, reserved: frozenset[str],
                   topic_names: Mapping[uuid.UUID, str]) -> TopicFindings:
    """The reserved and illegal topics ``body`` names: the guard's pre-pass, also run without building a
    guard where nothing found means nothing to seal (no authorizer: gateway/session/policy_check.py)."""
    names, ids = names_and_ids(spec, version, body)
    return inspect_names(names, ids, reserved, topic_names)


def inspect_names(names: list[str], ids: list[uuid.UUID], reserved: frozenset[str],
                  topic_names: Mapping[uuid.UUID, str]) -> TopicFindings:
    """inspect_topics over the topic names and ids however found: decoded, or walked off the wire
    (protocol/entities/topic_prepass.py)."""
    found_reserved: set[str] | None = None  # sets made only when something is found: nearly never
    illegal: set[str] | None = None
    for name in names:
        if name in reserved:
            if found_reserved is None:
                found_reserved = set()
            found_reserved.add(name)
        elif (_LEGAL.fullmatch(name) is None or name in _DOTS) and topic_name_problem(name) is not None:
            if illegal is None:  # the first test is topic_name_problem's own fast path, without the call
                illegal = set()
            illegal.add(name)
    if ids and reserved:  # an unknown id names nothing: policies answer UNKNOWN_TOPIC_ID and never relay it
        for topic_id in ids:
            named = topic_names.get(topic_id)
            if named is not None and named in reserved:  # by id only reservation is checked: the cluster named it
                if found_reserved is None:
                    found_reserved = set()
                found_reserved.add(named)
    if found_reserved is None and illegal is None:
        return NOTHING_FOUND
    return TopicFindings(frozenset(found_reserved or ()), frozenset(illegal or ()))


@dataclass(slots=True)
class TopicGuard:
    """The protections for one request: inspect before the policy, seal its verdict after."""

    api_key: int
    version: int
    request_spec: MessageSpec
    response_spec: MessageSpec
    reserved: frozenset[str]
    topic_names: Mapping[uuid.UUID, str]
    rules: TopicRules  # the API's (its route's)
    # Names the view denied only because they are illegal (their 29 becomes the API's own error).
    illegal_denied: set[str] = field(default_factory=set)

    def resolve(self, ref: TopicRef) -> str | None:
        return ref.name if ref.topic_id is None else self.topic_names.get(ref.topic_id)

    def inspect(self, body: Body) -> TopicFindings:
        names, ids = names_and_ids(self.request_spec, self.version, body)
        return inspect_names(names, ids, self.reserved, self.topic_names)

    def seal(self, verdict: Verdict, found: TopicFindings) -> Verdict:
        """The policy's verdict, made safe: nothing naming a reserved or illegal topic is relayed."""
        if isinstance(verdict, Refuse):
            return verdict
        if isinstance(verdict, Answer):
            self.fix_illegal(verdict.response)
            return verdict
        outbound = found if isinstance(verdict, Relay) else self.inspect(verdict.request)
        if outbound.suspicious:
            what = sorted(outbound.reserved) or sorted(outbound.illegal)
            return Refuse(f"api key {self.api_key} v{self.version} would relay a reserved or illegal topic "
                          f"({len(what)} names, first {what[0][:64]!r})")
        scrub = self._scrubs_responses()
        if not scrub and not self.illegal_denied:
            return verdict
        hook = self._finishing(verdict.on_response, scrub)
        return replace(verdict, on_response=hook) if isinstance(verdict, Rewrite) else Relay(hook)

    def _scrubs_responses(self) -> bool:
        """Whether an upstream answer may name a reserved topic nobody asked for (a listing: all topics, log dirs,
        a group's assignment…).  The data APIs answer exactly what was asked, which the request guard checked."""
        return bool(self.reserved) and not self.rules.answers_only_what_was_asked \
            and names_topics(self.response_spec, self.version)

    def _finishing(self, hook: Callable[[Body], Body] | None, scrub: bool) -> Callable[[Body], Body]:
        def finish(response: Body) -> Body:
            if hook is not None:
                response = hook(response)
            if scrub:
                drop_topics(self.response_spec, self.version, response, self._is_reserved)
            self.fix_illegal(response)
            return response
        return finish

    def _is_reserved(self, ref: TopicRef) -> bool:
        return self.resolve(ref) in self.reserved

    def fix_illegal(self, response: Body) -> None:
        """Turn the view's TOPIC_AUTHORIZATION_FAILED for illegal names into the API's own error."""
        if not self.illegal_denied:
            return
        code = self.rules.illegal_topic_error()
        for element, ref in list(elements_naming(self.response_spec, self.version, response,
                                                 lambda r: r.name in self.illegal_denied)):
            assert ref.name is not None
            message = (f"Topic name \"{ref.name}\" is illegal, {topic_name_problem(ref.name)}"
                       if code == KafkaError.INVALID_TOPIC_EXCEPTION else KafkaError.UNKNOWN_TOPIC_OR_PARTITION.message)
            _replace_error(element, code, message)


def _replace_error(value: Any, code: int, message: str) -> None:
    """Every TOPIC_AUTHORIZATION_FAILED inside ``value`` becomes ``code`` (with its message, where one is set)."""
    if isinstance(value, dict):
        if value.get("error_code") == KafkaError.TOPIC_AUTHORIZATION_FAILED:
            value["error_code"] = code
            if value.get("error_message") is not None:
                value["error_message"] = message
        for child in value.values():
            if isinstance(child, list | dict):
                _replace_error(child, code, message)
    elif isinstance(value, list):
        for child in value:
            _replace_error(child, code, message)


@dataclass(slots=True)
class UnrestrictedView:
    """An AuthzView for a gateway without an authorizer, for a request naming an illegal topic: every action on
    a legal topic is allowed, illegal names are not, and (as with ACLs) no cluster-level shortcut applies."""

    principal: KafkaPrincipal
    illegal: frozenset[str]
    illegal_denied: set[str]
    topic_names: Mapping[uuid.UUID, str]

    def allowed(self, action: Action) -> bool:
        if action.resource_type == ResourceType.TOPIC and action.name in self.illegal:
            self.illegal_denied.add(action.name)
            return False
        return action.resource_type != ResourceType.CLUSTER

    def allowed_any(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        return True

    def authorized_operations(self, resource_type: ResourceType, name: str,
                              candidates: Iterable[AclOperation]) -> int:
        return sum(1 << int(operation) for operation in set(candidates))

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self.topic_names.get(topic_id)
