"""Kafka's sasl.kerberos.principal.to.local.rules (KerberosShortNamer): Kerberos principal → short name.

Rules follow Hadoop's auth_to_local syntax plus Kafka's /L and /U; patterns are Java regexes and
replacements Java replacement strings, reproduced here on top of Python's ``re``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from auth.errors import AuthenticationFailed

DEFAULT_PRINCIPAL_TO_LOCAL_RULES = ("DEFAULT",)

# Kafka's grammar (KerberosShortNamer.RULE_PARSER); a rule must be consumed entirely.
_RULE_PARSER = re.compile(
    r"((DEFAULT)|((RULE:\[(\d*):([^\]]*)](\(([^)]*)\))?(s/([^/]*)/([^/]*)/(g)?)?/?(L|U)?)))"
)
# Kafka's KerberosName.NAME_PARSER: at most two components, and a realm.
_NAME_PARSER = re.compile(r"([^/@]*)(/([^/@]*))?@([^/@]*)")
_NON_SIMPLE = re.compile(r"[/@]")
_LIST_SEPARATOR = re.compile(r"\s*,\s*")


class KerberosRuleError(ValueError):
    """sasl.kerberos.principal.to.local.rules is malformed; raised when the rules are loaded."""


class NoMatchingKerberosRule(AuthenticationFailed):
    """No rule gives a short name for the principal; Kafka fails the connection."""


@dataclass(slots=True, frozen=True)
class KerberosName:
    """``service/host@REALM``; host and realm are None when absent (Kafka's KerberosName)."""

    service_name: str
    host_name: str | None = None
    realm: str | None = None

    @classmethod
    def parse(cls, principal: str) -> KerberosName:
        m = _NAME_PARSER.fullmatch(principal)
        if m is None:
            if "@" in principal:
                raise ValueError(f"Malformed Kerberos name: {principal}")
            # Kafka keeps a name without a realm whole, even if it has slashes.
            return cls(principal)
        return cls(m.group(1), m.group(3), m.group(4))

    def __str__(self) -> str:
        host = f"/{self.host_name}" if self.host_name is not None else ""
        realm = f"@{self.realm}" if self.realm is not None else ""
        return f"{self.service_name}{host}{realm}"


def _java_regex(pattern: str) -> re.Pattern[str]:
    """Compile a Java regex with ``re``, rewriting the Java-only spellings people use in rules."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        if pattern.startswith("\\Q", i):  # \Q...\E quotes literally
            end = pattern.find("\\E", i + 2)
            stop = n if end < 0 else end
            out.append(re.escape(pattern[i + 2:stop]))
            i = n if end < 0 else end + 2
        elif pattern.startswith("\\z", i):
            out.append(r"\Z")
            i += 2
        elif pattern[i] == "\\" and i + 1 < n:
            out.append(pattern[i:i + 2])
            i += 2
        elif pattern.startswith("(?<", i) and pattern[i + 3:i + 4] not in ("=", "!"):
            out.append("(?P<")  # Java's named group (?<name>...)
            i += 3
        else:
            out.append(pattern[i])
            i += 1
    try:
        # re.ASCII: Java's \w, \d, \s and \b are ASCII-only by default.
        return re.compile("".join(out), re.ASCII)
    except re.error as exc:
        raise KerberosRuleError(f"invalid regular expression {pattern!r}: {exc}") from None


def _java_replacement(replacement: str, pattern: re.Pattern[str]) -> tuple[str | int, ...]:
    """Java's Matcher replacement syntax (``\\x``, ``$n``, ``${name}``) as literals and group numbers.

    Java reads ``$n`` greedily while the longer number still names a group; the errors Java
    raises when a rule first fires are raised here, when the rules are loaded.
    """
    parts: list[str | int] = []
    literal: list[str] = []
    i, n = 0, len(replacement)
    while i < n:
        c = replacement[i]
        if c == "\\":
            if i + 1 >= n:
                raise KerberosRuleError(f"replacement {replacement!r} ends with an unescaped '\\'")
            literal.append(replacement[i + 1])
            i += 2
            continue
        if c != "$":
            literal.append(c)
            i += 1
            continue
        if literal:
            parts.append("".join(literal))
            literal.clear()
        if replacement.startswith("{", i + 1):
            close = replacement.find("}", i + 2)
            name = replacement[i + 2:close] if close >= 0 else ""
            if name not in pattern.groupindex:
                raise KerberosRuleError(f"replacement {replacement!r} names no group of {pattern.pattern!r}")
            parts.append(pattern.groupindex[name])
            i = close + 1
            continue
        if i + 1 >= n or not ("0" <= replacement[i + 1] <= "9"):
            raise KerberosRuleError(f"replacement {replacement!r}: '$' must be followed by a group number")
        ref = int(replacement[i + 1])
        i += 2
        while i < n and "0" <= replacement[i] <= "9" and ref * 10 + int(replacement[i]) <= pattern.groups:
            ref = ref * 10 + int(replacement[i])
            i += 1
        if ref > pattern.groups:
            raise KerberosRuleError(f"replacement {replacement!r} refers to group {ref} of {pattern.pattern!r}")
        parts.append(ref)
    if literal:
        parts.append("".join(literal))
    return tuple(parts)


def _format_parts(fmt: str, components: int) -> tuple[str | int, ...]:
    """``[n:format]``: text with ``$0`` (realm) .. ``$n`` (components), checked against n."""
    parts: list[str | int] = []
    for m in re.finditer(r"([^$]*)(\$(\d*))?", fmt):
        if m.group(1):
            parts.append(m.group(1))
        if m.group(2) is None:
            continue
        digits = m.group(3)
        if not digits:
            raise KerberosRuleError(f"bad format in username mapping in {fmt!r}")
        index = int(digits)
        if index > components:
            raise KerberosRuleError(f"index {index} from {fmt} is outside of the valid range 0 to {components}")
        parts.append(index)
    return tuple(parts)


@dataclass(slots=True, frozen=True)
class KerberosRule:
    """``DEFAULT`` or ``RULE:[n:format](match)s/from/to/[g][/L|/U]``; ``str()`` is Kafka's toString()."""

    text: str = "DEFAULT"
    components: int = 0
    fmt: tuple[str | int, ...] = ()
    match: re.Pattern[str] | None = None
    from_pattern: re.Pattern[str] | None = None
    to: tuple[str | int, ...] = ()
    repeat: bool = False
    to_lower_case: bool = False
    to_upper_case: bool = False
    is_default: bool = True

    @classmethod
    def parse(cls, text: str) -> KerberosRule:
        m = _RULE_PARSER.match(text)  # Java's lookingAt(), then the whole-rule check
        if m is None or m.end() != len(text):
            rest = text[m.end():] if m else text
            raise KerberosRuleError(f"Invalid rule: `{text}`, unmatched substring: `{rest}`")
        if m.group(2) is not None:
            return cls()
        if not m.group(5):
            raise KerberosRuleError(f"Invalid rule: `{text}`: missing the number of components")
        components = int(m.group(5))
        from_pattern = _java_regex(m.group(10)) if m.group(10) is not None else None
        return cls(
            text=text,
            components=components,
            fmt=_format_parts(m.group(6), components),
            match=_java_regex(m.group(8)) if m.group(8) is not None else None,
            from_pattern=from_pattern,
            to=_java_replacement(m.group(11), from_pattern) if from_pattern is not None else (),
            repeat=m.group(12) == "g",
            to_lower_case=m.group(13) == "L",
            to_upper_case=m.group(13) == "U",
            is_default=False,
        )

    def apply(self, params: Sequence[str], default_realm: str) -> str | None:
        """The short name, or None if the rule does not apply; ``params`` is (realm, *components)."""
        result: str | None = None
        if self.is_default:
            if params[0] == default_realm:
                result = params[1]
        elif len(params) - 1 == self.components:
            base = "".join(p if isinstance(p, str) else params[p] for p in self.fmt)
            if self.match is None or self.match.fullmatch(base):
                if self.from_pattern is None:
                    result = base
                else:
                    result = self.from_pattern.sub(self._expand, base, count=0 if self.repeat else 1)
        if result is None:
            return None
        if _NON_SIMPLE.search(result):
            # Kafka stops here rather than trying the next rule.
            raise NoMatchingKerberosRule(f"Non-simple name {result} after auth_to_local rule {self}")
        if self.to_lower_case:
            return result.lower()
        if self.to_upper_case:
            return result.upper()
        return result

    def _expand(self, m: re.Match[str]) -> str:
        return "".join(p if isinstance(p, str) else (m.group(p) or "") for p in self.to)

    def __str__(self) -> str:
        return self.text


def split_rules(value: str) -> list[str]:
    """Kafka's LIST config parsing: trimmed, split on commas with surrounding whitespace."""
    trimmed = value.strip()
    return _LIST_SEPARATOR.split(trimmed) if trimmed else []


@dataclass(slots=True, frozen=True)
class KerberosShortNamer:
    """Applies the rules in order, first match wins; DEFAULT needs the default realm of krb5.conf."""

    default_realm: str
    rules: tuple[KerberosRule, ...]

    @classmethod
    def from_rules(cls, default_realm: str, rules: str | Sequence[str] | None = None) -> KerberosShortNamer:
        """None means Kafka's default (``DEFAULT``); a string is split like Kafka's list config."""
        if rules is None:
            rules = DEFAULT_PRINCIPAL_TO_LOCAL_RULES
        elif isinstance(rules, str):
            rules = split_rules(rules)
        return cls(default_realm, tuple(KerberosRule.parse(rule) for rule in rules))

    def short_name(self, principal: str | KerberosName) -> str:
        """The local name for ``principal``; raises NoMatchingKerberosRule when no rule applies."""
        try:
            name = principal if isinstance(principal, KerberosName) else KerberosName.parse(principal)
        except ValueError as exc:
            raise NoMatchingKerberosRule(str(exc)) from None
        if name.host_name is None:
            if name.realm is None:
                return name.service_name  # already simple
            params: tuple[str, ...] = (name.realm, name.service_name)
        else:
            params = (name.realm or "", name.service_name, name.host_name)
        for rule in self.rules:
            result = rule.apply(params, self.default_realm)
            if result is not None:
                return result
        listed = ", ".join(str(rule) for rule in self.rules)
        raise NoMatchingKerberosRule(f"No rules apply to {name}, rules [{listed}]")

    __call__ = short_name  # plugs into DefaultPrincipalBuilder(kerberos_short_name=...)
