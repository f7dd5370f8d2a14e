"""The two authorizer settings a replay needs besides the ACLs: ``super.users`` and
``allow.everyone.if.no.acl.found`` — from the options, else what the log's decisions show.

Free of pyspark (the log's evidence comes in as collected facts) and of the gateway (pipeline/ reads
logs and ACL files offline), so the gateway config is not read here: its values are given as options.
"""

from __future__ import annotations

from dataclasses import dataclass

from auth.principal import KafkaPrincipal
from pipeline.errors import PipelineError

OPTION, LOG, DEFAULT = "option", "log", "default"


@dataclass(slots=True, frozen=True)
class LogEvidence:
    """What the live decisions reveal: who was answered as a super user, and how NoAclDefault answered."""

    super_users: frozenset[str]
    no_acl_default_allowed: bool  # some decision was ALLOWED by NoAclDefault
    no_acl_default_denied: bool  # some decision was DENIED by NoAclDefault


@dataclass(slots=True, frozen=True)
class ReplaySettings:
    super_users: frozenset[str]
    allow_everyone_if_no_acl_found: bool
    super_users_from: str  # OPTION or LOG
    allow_everyone_from: str  # OPTION, LOG or DEFAULT


def parse_super_users(text: str) -> frozenset[str]:
    """Kafka's ``super.users`` value: ``User:a;User:b``."""
    users = frozenset(u.strip() for u in text.split(";") if u.strip())
    for user in users:
        try:
            KafkaPrincipal.parse(user)
        except ValueError:
            raise PipelineError(f"super users: {user!r} is not Type:name (entries are separated by ';')") from None
    return users


@dataclass(slots=True, frozen=True)
class GivenSettings:
    """What the options said (None: not said)."""

    super_users: frozenset[str] | None = None
    allow_everyone: bool | None = None


def resolve(given: GivenSettings, evidence: LogEvidence) -> ReplaySettings:
    """Given settings win; else the log's: its SuperUser decisions name the super users, and NoAclDefault's
    answers the default (Kafka's default, false, when the log never shows it)."""
    users, users_from = (given.super_users, OPTION) if given.super_users is not None \
        else (evidence.super_users, LOG)
    if given.allow_everyone is not None:
        return ReplaySettings(users, given.allow_everyone, users_from, OPTION)
    if evidence.no_acl_default_allowed and evidence.no_acl_default_denied:
        raise PipelineError("the log shows NoAclDefault both allowing and denying (allow.everyone.if.no.acl.found "
                            "changed within it?): say which to replay with --allow-everyone-if-no-acl-found")
    if evidence.no_acl_default_allowed or evidence.no_acl_default_denied:
        return ReplaySettings(users, evidence.no_acl_default_allowed, users_from, LOG)
    return ReplaySettings(users, False, users_from, DEFAULT)
