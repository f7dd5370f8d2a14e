"""Kafka's ssl.principal.mapping.rules (SslPrincipalMapper, KIP-371): certificate DN → short name.

Rules are Java regexes with Java replacement strings; this module reproduces Kafka's rule
splitting, its parser, and Matcher.replaceAll's replacement syntax on top of Python's ``re``.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

from auth.errors import AuthenticationFailed
from auth.tls import TlsConfigError

DEFAULT_SSL_PRINCIPAL_MAPPING_RULES = "DEFAULT"

# Kafka's own grammar (SslPrincipalMapper.RULE_PATTERN): a pattern and a replacement made of
# escape pairs or characters other than '\' and '/', an optional L/U, then anything — which
# the parser rejects — or an arbitrary chunk, which it rejects too unless empty.
_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)", re.ASCII)
_PARSER = re.compile(_RULE, re.ASCII)
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


class NoMatchingRule(AuthenticationFailed):
    """No rule matched the distinguished name; Kafka fails the connection (it is not ANONYMOUS)."""


def _config_error(message: str) -> TlsConfigError:
    return TlsConfigError(f"ssl.principal.mapping.rules: {message}")


def _java_regex_to_python(pattern: str) -> str:
    """Rewrite the Java-only spellings that Python's ``re`` lacks or reads differently."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            if nxt == "Q":  # \Q...\E quotes everything up to \E (or the end)
                end = pattern.find("\\E", i + 2)
                stop = n if end < 0 else end
                out.append(re.escape(pattern[i + 2:stop]))
                i = n if end < 0 else end + 2
                continue
            if nxt == "z":  # Java \z is the absolute end, which Python spells \Z
                out.append(r"\Z")
            elif nxt == "Z":  # Java \Z also allows one final line terminator
                out.append(r"(?=\n?\Z)")
            elif nxt == "k" and pattern.startswith("<", i + 2):  # \k<name> back-reference
                close = pattern.find(">", i + 3)
                if close < 0:
                    raise _config_error(f"unterminated \\k<name> in {pattern!r}")
                out.append(f"(?P={pattern[i + 3:close]})")
                i = close + 1
                continue
            else:
                out.append(pattern[i:i + 2])
            i += 2
            continue
        if pattern.startswith("(?<", i) and i + 3 < n and pattern[i + 3] not in "=!":
            out.append("(?P<")  # Java's named group (?<name>...)
            i += 3
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _compile(pattern: str) -> re.Pattern[str]:
    # re.ASCII: Java's \w, \d, \s, \b and (?i) are ASCII-only unless asked otherwise.
    # FutureWarnings flag constructs (nested classes, &&) that Java and Python read differently.
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        try:
            return re.compile(_java_regex_to_python(pattern), re.ASCII)
        except (re.error, FutureWarning) as exc:
            raise _config_error(f"invalid pattern {pattern!r}: {exc}") from None


def _parse_replacement(replacement: str, compiled: re.Pattern[str]) -> tuple[str | int, ...]:
    """Java replacement syntax (``\\x`` literal, ``$n``, ``${name}``) into literals and group numbers.

    Kafka first turns a ``$n`` naming a group that does not exist into a literal (after
    dropping trailing digits, as Java would); Java then reads ``$n`` greedily, digit by digit,
    while the number still names a group.  Errors Java would raise when the rule first
    matches are raised here, at configuration time.
    """
    groups = compiled.groups
    parts: list[str | int] = []
    literal: list[str] = []

    def flush() -> None:
        if literal:
            parts.append("".join(literal))
            literal.clear()

    i, n = 0, len(replacement)
    while i < n:
        c = replacement[i]
        if c == "\\":
            if i + 1 >= n:
                raise _config_error(f"replacement {replacement!r} ends with an unescaped '\\'")
            literal.append(replacement[i + 1])
            i += 2
            continue
        if c != "$":
            literal.append(c)
            i += 1
            continue
        if replacement.startswith("{", i + 1):
            close = replacement.find("}", i + 2)
            name = replacement[i + 2:close] if close >= 0 else ""
            if close < 0 or name not in compiled.groupindex:
                raise _config_error(f"replacement {replacement!r} names no group of the pattern")
            flush()
            parts.append(compiled.groupindex[name])
            i = close + 1
            continue
        j = i + 1
        while j < n and replacement[j].isdigit() and replacement[j].isascii():
            j += 1
        digits = replacement[i + 1:j]
        if not digits:
            raise _config_error(f"replacement {replacement!r}: '$' must be followed by a group number")
        if groups and not digits.startswith("0"):
            number = int(digits)
            while number > groups and number >= 10:
                number //= 10
            if number > groups:  # Kafka's escapeLiteralBackReferences: keep "$n" as text
                literal.append("$" + digits)
                i = j
                continue
        ref = int(digits[0])
        k = 1
        while k < len(digits) and ref * 10 + int(digits[k]) <= groups:
            ref = ref * 10 + int(digits[k])
            k += 1
        if ref > groups:
            raise _config_error(f"replacement {replacement!r} refers to group {ref}, "
                                f"but the pattern has {groups}")
        flush()
        parts.append(ref)
        i += 1 + k
    flush()
    return tuple(parts)


@dataclass(slots=True, frozen=True)
class MappingRule:
    """One ``RULE:pattern/replacement/[LU]`` or ``DEFAULT``; ``str()`` is Kafka's Rule.toString()."""

    pattern: str | None = None  # None for DEFAULT
    replacement: str = ""
    to_lower_case: bool = False
    to_upper_case: bool = False
    compiled: re.Pattern[str] | None = None
    expansion: tuple[str | int, ...] = ()

    @classmethod
    def default(cls) -> MappingRule:
        return cls()

    @classmethod
    def rule(cls, pattern: str, replacement: str, case: str = "") -> MappingRule:
        compiled = _compile(pattern)
        return cls(pattern, replacement, case == "L", case == "U", compiled,
                   _parse_replacement(replacement, compiled))

    @property
    def is_default(self) -> bool:
        return self.compiled is None

    def apply(self, distinguished_name: str) -> str | None:
        """The short name, or None when this rule does not match the whole name."""
        if self.compiled is None:
            return distinguished_name
        if self.compiled.fullmatch(distinguished_name) is None:
            return None
        # Kafka replaces with String.replaceAll, i.e. every (find-style) match, not just the whole.
        result = self.compiled.sub(self._expand, distinguished_name)
        if self.to_lower_case:
            return result.lower()
        if self.to_upper_case:
            return result.upper()
        return result

    def _expand(self, match: re.Match[str]) -> str:
        return "".join(part if isinstance(part, str) else (match.group(part) or "") for part in self.expansion)

    def __str__(self) -> str:
        if self.is_default:
            return "DEFAULT"
        case = "/L" if self.to_lower_case else "/U" if self.to_upper_case else ""
        return f"RULE:{self.pattern}/{self.replacement}{case}"


def split_rules(rules: str) -> list[str]:
    """Kafka's rule splitter: commas separate rules, yet may also appear inside a pattern.

    ksgate also accepts line breaks between rules (natural in a YAML block); Kafka's
    splitter would silently skip a rule separated from the next by a line break alone.
    """
    text = _LINE_BREAK.sub(",", rules).strip()
    return [m.group(1) for m in _SPLITTER.finditer(text)]


def parse_rule(text: str) -> MappingRule | None:
    """One rule as split by :func:`split_rules`; None for an empty one (Kafka ignores those)."""
    m = _PARSER.match(text)
    if m is None or m.end() != len(text):
        rest = text[m.end():] if m else text
        raise _config_error(f"invalid rule {text!r}, unmatched substring {rest!r}")
    if m.group(1) is not None:
        return MappingRule.default()
    if m.group(2) is not None:
        return MappingRule.rule(m.group(2), m.group(4), m.group(6))
    return None


@dataclass(slots=True, frozen=True)
class SslPrincipalMapper:
    """Maps a certificate's RFC 2253 subject to a principal name; the first matching rule wins."""

    rules: tuple[MappingRule, ...]

    @classmethod
    def from_rules(cls, rules: str | Sequence[str] | None) -> SslPrincipalMapper:
        """Parse the setting; None means Kafka's default (``DEFAULT``); ``""`` means no rules at all."""
        if rules is None:
            rules = DEFAULT_SSL_PRINCIPAL_MAPPING_RULES
        elif not isinstance(rules, str):
            rules = ",".join(rules)
        parsed = (parse_rule(text) for text in split_rules(rules))
        return cls(tuple(rule for rule in parsed if rule is not None))

    def get_name(self, distinguished_name: str) -> str:
        """The mapped name; raises NoMatchingRule when no rule applies."""
        for rule in self.rules:
            name = rule.apply(distinguished_name)
            if name is not None:
                return name
        listed = ", ".join(str(rule) for rule in self.rules)
        raise NoMatchingRule(f"No rules apply to {distinguished_name}, rules [{listed}]")

    principal_name = get_name  # the name DefaultPrincipalBuilder(ssl_mapper=...) is given

    def __str__(self) -> str:
        return f"SslPrincipalMapper(rules = [{', '.join(str(rule) for rule in self.rules)}])"
