"""ssl.principal.mapping.rules: Kafka's documented examples, its parser's edge cases, Java regex semantics."""

from __future__ import annotations

import pytest

from auth.errors import AuthenticationFailed
from auth.principal import KafkaPrincipal, SslAuthContext
from auth.principal_builder import DefaultPrincipalBuilder
from auth.ssl_principal_mapping import NoMatchingRule, SslPrincipalMapper
from auth.tls import TlsConfigError

KAFKA_DOCS_RULES = (
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,"
    "DEFAULT"
)


def rule_strings(rules: str) -> str:
    """Kafka's SslPrincipalMapper.toString() list, to compare with its own tests."""
    return "[" + ", ".join(str(rule) for rule in SslPrincipalMapper.from_rules(rules).rules) + "]"


@pytest.mark.parametrize(("dn", "expected"), [
    ("CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown", "serviceuser"),
    ("CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown", "adminuser@admin"),
    ("OU=JavaSoft,cn=Duke.Two,O=Sun", "duke.two"),  # third rule: a CN anywhere, lower-cased
    ("OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"),  # DEFAULT
])
def test_kafka_documentation_example_rules_map_as_documented(dn: str, expected: str) -> None:
    assert SslPrincipalMapper.from_rules(KAFKA_DOCS_RULES).get_name(dn) == expected


@pytest.mark.parametrize(("dn", "expected"), [
    ("CN=Duke,OU=ServiceUsers,O=Org,C=US", "duke"),
    ("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"),
    ("cn=duke,ou=sme,dc=mycp,dc=com", "DUKE@SME"),
    ("cN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE"),
    ("OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"),
])
def test_first_matching_rule_wins_with_lower_and_upper_case_options(dn: str, expected: str) -> None:
    rules = ", ".join([
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
        "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
        "DEFAULT",
    ])
    assert SslPrincipalMapper.from_rules(rules).get_name(dn) == expected


def test_default_rule_returns_the_distinguished_name_unchanged() -> None:
    dn = r"CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz"
    assert SslPrincipalMapper.from_rules("DEFAULT").get_name(dn) == dn
    assert SslPrincipalMapper.from_rules(None).get_name(dn) == dn  # unset means DEFAULT


def test_no_matching_rule_fails_authentication_and_names_the_dn() -> None:
    mapper = SslPrincipalMapper.from_rules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/")
    with pytest.raises(NoMatchingRule) as raised:
        mapper.get_name("CN=alice,OU=Admins")
    assert isinstance(raised.value, AuthenticationFailed)
    assert "CN=alice,OU=Admins" in str(raised.value)


def test_empty_rules_match_nothing() -> None:
    with pytest.raises(NoMatchingRule):
        SslPrincipalMapper.from_rules("").get_name("CN=alice")


def test_a_rule_must_match_the_whole_name() -> None:
    mapper = SslPrincipalMapper.from_rules("RULE:CN=([a-z]+)/$1/")
    with pytest.raises(NoMatchingRule):
        mapper.get_name("CN=alice,O=Acme")
    assert mapper.get_name("CN=alice") == "alice"


def test_mapper_plugs_into_the_default_principal_builder() -> None:
    builder = DefaultPrincipalBuilder(ssl_mapper=SslPrincipalMapper.from_rules(KAFKA_DOCS_RULES).principal_name)
    context = SslAuthContext("SSL", "127.0.0.1",
                             "CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown")
    assert builder.build(context) == KafkaPrincipal("User", "serviceuser")


@pytest.mark.parametrize(("expected", "rules"), [
    ("[]", ""),
    ("[DEFAULT]", "DEFAULT"),
    ("[RULE:/]", "RULE://"),
    ("[RULE:/.*]", "RULE:/.*/"),
    ("[RULE:/.*/L]", "RULE:/.*/L"),
    ("[RULE:/, DEFAULT]", "RULE://,DEFAULT"),
    ("[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  "),
    ("[RULE:   /     , DEFAULT]", "  RULE:   /     / ,  DEFAULT  "),
    ("[RULE:  /     /U, DEFAULT]", "  RULE:  /     /U   ,DEFAULT  "),
    ("[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]", "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  "),
    ("[]", ",   , , ,      , , ,   "),
    ("[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,"),
    ("[RULE: /   , DEFAULT]", ",  , RULE: /   /    ,,,   DEFAULT, ,   "),
    ("[RULE:   /  /U, DEFAULT]", "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,"),
    (r"[RULE:\/\\\(\)\n\t/\/\/]", r"RULE:\/\\\(\)\n\t/\/\//"),
    (r"[RULE:\**\/+/*/L, RULE:\/*\**/**]", r"RULE:\**\/+/*/L,RULE:\/*\**/**/"),
    (r"[RULE:,RULE:,/,RULE:,\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]",
     r"RULE:,RULE:,/,RULE:,\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT"),
])
def test_rules_split_exactly_as_kafka_splits_them(expected: str, rules: str) -> None:
    # The cases of Kafka's SslPrincipalMapperTest.testRulesSplitting: commas inside patterns,
    # escaped slashes, empty rules ignored, whitespace around rules trimmed.
    assert rule_strings(rules) == expected


def test_escaped_comma_in_a_dn_is_matched_by_an_escaped_backslash() -> None:
    # Kafka's testCommaWithWhitespace: the rule text holds \\, (a literal backslash, then a comma).
    mapper = SslPrincipalMapper.from_rules(r"RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.get_name(r"CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz") == r"Tkac\, Adam"


def test_escaped_slashes_in_pattern_and_replacement_are_literal_slashes() -> None:
    mapper = SslPrincipalMapper.from_rules(r"RULE:^CN=([^\/]*)\/([^\/]*)$/$1\/svc-$2/")
    assert mapper.get_name("CN=team/app") == "team/svc-app"


def test_rules_may_be_separated_by_line_breaks() -> None:
    mapper = SslPrincipalMapper.from_rules("RULE:^CN=([^,]*),OU=svc$/$1/\r\n  RULE:^CN=([^,]*)$/$1/U\nDEFAULT")
    assert [str(r) for r in mapper.rules] == ["RULE:^CN=([^,]*),OU=svc$/$1", "RULE:^CN=([^,]*)$/$1/U", "DEFAULT"]
    assert mapper.get_name("CN=bob") == "BOB"


def test_a_list_of_rules_is_accepted() -> None:
    mapper = SslPrincipalMapper.from_rules(["RULE:^CN=(.*?),OU=(.*)$/$1/", "DEFAULT"])
    assert mapper.get_name("CN=a,OU=b") == "a"
    assert mapper.get_name("O=x") == "O=x"


@pytest.mark.parametrize("rules", [
    "default",
    "DEFAUL",
    "DEFAULT/L",
    "DEFAULT/U",
    "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
    "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
    "RULE:^CN=(.*?)$/$1/, DEFAULT trailing",
])
def test_malformed_rules_are_rejected_like_kafka_rejects_them(rules: str) -> None:
    with pytest.raises(TlsConfigError, match=r"ssl\.principal\.mapping\.rules"):
        SslPrincipalMapper.from_rules(rules)


@pytest.mark.parametrize("rules", [
    "RULE:^CN=(.*$/$1/",  # unbalanced group
    "RULE:^CN=(.*)$/$/",  # '$' without a group
    "RULE:^CN=(.*)$/$1\\/",  # replacement ends in an escape... of the separator, so no replacement end
    "RULE:^CN=.*$/$1/",  # group 1 of a pattern without groups
    "RULE:^CN=(?<user>.*)$/${nobody}/",  # unknown named group
    "RULE:^CN=[[a-z]&&[^b]]$/x/",  # Java class intersection; Python would read it differently
])
def test_rules_java_would_reject_or_fail_on_are_rejected_at_configuration(rules: str) -> None:
    with pytest.raises(TlsConfigError):
        SslPrincipalMapper.from_rules(rules)


@pytest.mark.parametrize(("rule", "dn", "expected"), [
    # Kafka keeps a reference to a missing group as text rather than failing.
    ("RULE:^CN=(.*?),O=(.*?),C=(.*)$/$1@$4/", "CN=a,O=b,C=c", "a@$4"),
    # Java reads $12 as group 1 then "2" when there is no group 12.
    ("RULE:^CN=(.*?),O=(.*)$/$12/", "CN=a,O=b", "a2"),
    ("RULE:^CN=(.*)$/[$0]/", "CN=a", "[CN=a]"),
    ("RULE:^CN=(.*)$/\\$1 is $1/", "CN=a", "$1 is a"),
    ("RULE:^CN=(?<user>[^,]*)$/${user}/", "CN=a", "a"),
    ("RULE:^CN=(x)?(.*)$/[$1]$2/", "CN=abc", "[]abc"),  # a group that did not take part is empty
    ("RULE:\\QCN=a.b\\E/ok/", "CN=a.b", "ok"),  # \Q...\E quotes
])
def test_replacements_follow_java_replacement_syntax(rule: str, dn: str, expected: str) -> None:
    assert SslPrincipalMapper.from_rules(rule).get_name(dn) == expected


def test_replacement_applies_to_every_match_like_java_replace_all() -> None:
    # Kafka checks matches() and then calls replaceAll: ".*" also matches the empty end.
    assert SslPrincipalMapper.from_rules("RULE:.*/x/").get_name("CN=a") == "xx"


def test_character_classes_are_ascii_only_like_java() -> None:
    mapper = SslPrincipalMapper.from_rules(r"RULE:^CN=(\w+)$/$1/,DEFAULT")
    assert mapper.get_name("CN=bob_1") == "bob_1"
    assert mapper.get_name("CN=Jürgen") == "CN=Jürgen"  # \w does not match ü in Java
