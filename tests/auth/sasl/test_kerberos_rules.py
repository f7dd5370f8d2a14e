"""sasl.kerberos.principal.to.local.rules: Kafka's documented examples and its KerberosShortNamer semantics."""

from __future__ import annotations

import pytest

from auth.sasl.kerberos_rules import (
    KerberosName,
    KerberosRuleError,
    KerberosShortNamer,
    NoMatchingKerberosRule,
    split_rules,
)


def namer(*rules: str, realm: str = "REALM.COM") -> KerberosShortNamer:
    return KerberosShortNamer.from_rules(realm, list(rules))


# -- KerberosName -------------------------------------------------------------------------------


def test_kerberos_name_splits_primary_instance_and_realm() -> None:
    name = KerberosName.parse("App.service-name/example.com@REALM.COM")
    assert (name.service_name, name.host_name, name.realm) == ("App.service-name", "example.com", "REALM.COM")
    assert str(name) == "App.service-name/example.com@REALM.COM"


def test_kerberos_name_without_instance_has_no_host() -> None:
    name = KerberosName.parse("alice@REALM.COM")
    assert (name.service_name, name.host_name, name.realm) == ("alice", None, "REALM.COM")


def test_kerberos_name_without_realm_is_kept_whole() -> None:
    assert KerberosName.parse("a/b/c") == KerberosName("a/b/c")


def test_kerberos_name_with_three_components_and_a_realm_is_malformed() -> None:
    with pytest.raises(ValueError, match="Malformed Kerberos name"):
        KerberosName.parse("a/b/c@REALM.COM")


# -- DEFAULT ------------------------------------------------------------------------------------


def test_default_rule_takes_the_first_component_in_the_default_realm() -> None:
    default = namer("DEFAULT")
    assert default.short_name("alice@REALM.COM") == "alice"
    assert default.short_name("kafka/broker1.example.com@REALM.COM") == "kafka"


def test_default_rule_rejects_a_foreign_realm() -> None:
    with pytest.raises(NoMatchingKerberosRule, match=r"No rules apply to alice@OTHER.COM, rules \[DEFAULT\]"):
        namer("DEFAULT").short_name("alice@OTHER.COM")


def test_unset_rules_mean_default() -> None:
    assert KerberosShortNamer.from_rules("REALM.COM", None).short_name("alice@REALM.COM") == "alice"


def test_an_empty_rule_list_maps_nothing_with_a_realm() -> None:
    empty = KerberosShortNamer.from_rules("REALM.COM", "")
    assert empty.rules == ()
    with pytest.raises(NoMatchingKerberosRule):
        empty.short_name("alice@REALM.COM")


def test_a_name_without_realm_is_returned_unchanged_without_consulting_rules() -> None:
    assert namer().short_name("alice") == "alice"


def test_a_malformed_principal_is_a_failed_mapping() -> None:
    with pytest.raises(NoMatchingKerberosRule, match="Malformed"):
        namer("DEFAULT").short_name("a/b/c@REALM.COM")


# -- Kafka's documented example ----------------------------------------------------------------


def test_documented_example_maps_mydomain_users_and_keeps_default() -> None:
    # Kafka docs: sasl.kerberos.principal.to.local.rules=RULE:[1:$1@$0](.*@MYDOMAIN.COM)s/@.*//,DEFAULT
    rules = KerberosShortNamer.from_rules("EXAMPLE.COM", "RULE:[1:$1@$0](.*@MYDOMAIN.COM)s/@.*//,DEFAULT")
    assert rules.short_name("user@MYDOMAIN.COM") == "user"
    assert rules.short_name("user@EXAMPLE.COM") == "user"
    with pytest.raises(NoMatchingKerberosRule):
        rules.short_name("user@ELSEWHERE.COM")
    # A one-component rule does not apply to a two-component name; DEFAULT wants EXAMPLE.COM.
    with pytest.raises(NoMatchingKerberosRule):
        rules.short_name("user/host@MYDOMAIN.COM")


def test_hadoop_style_rules_map_service_principals_by_match_pattern() -> None:
    # Hadoop's auth_to_local examples, which Kafka's syntax follows.
    rules = namer(
        "RULE:[2:$1@$0]([nd]n@.*EXAMPLE.COM)s/.*/hdfs/",
        "RULE:[2:$1@$0]([jt]t@.*EXAMPLE.COM)s/.*/mapred/",
        "DEFAULT",
        realm="EXAMPLE.COM",
    )
    assert rules.short_name("nn/namenode.example.com@EXAMPLE.COM") == "hdfs"
    assert rules.short_name("dn/datanode.example.com@EXAMPLE.COM") == "hdfs"
    assert rules.short_name("jt/tracker.example.com@EXAMPLE.COM") == "mapred"
    assert rules.short_name("alice/admin@EXAMPLE.COM") == "alice"


# -- Kafka's KerberosNameTest vectors ----------------------------------------------------------


def test_substitution_with_a_group_reference_strips_the_app_prefix() -> None:
    rules = namer("RULE:[1:$1](App\\..*)s/App\\.(.*)/$1/g", "RULE:[2:$1](App\\..*)s/App\\.(.*)/$1/g", "DEFAULT")
    assert rules.short_name("App.service-name/example.com@REALM.COM") == "service-name"
    assert rules.short_name("App.service-name@REALM.COM") == "service-name"
    assert rules.short_name("user/host@REALM.COM") == "user"


LOWER = ("RULE:[1:$1]/L", "RULE:[2:$1](Test.*)s/ABC///L", "RULE:[2:$1](ABC.*)s/ABC/XYZ/g/L",
         "RULE:[2:$1](App\\..*)s/App\\.(.*)/$1/g/L", "RULE:[2:$1]/L", "DEFAULT")


@pytest.mark.parametrize(
    ("principal", "lower"),
    [
        ("User@REALM.COM", "user"),
        ("TestABC/host@FOO.COM", "test"),
        ("ABC_User_ABC/host@FOO.COM", "xyz_user_xyz"),
        ("App.SERVICE-name/example.com@REALM.COM", "service-name"),
        ("User/root@REALM.COM", "user"),
    ],
)
def test_slash_l_lower_cases_and_slash_u_upper_cases_the_result(principal: str, lower: str) -> None:
    assert namer(*LOWER).short_name(principal) == lower
    upper_rules = tuple(rule[:-1] + "U" if rule.endswith("/L") else rule for rule in LOWER)
    assert namer(*upper_rules).short_name(principal) == lower.upper()


@pytest.mark.parametrize(
    "rule",
    [
        "default", "DEFAUL", "DEFAULT/L", "DEFAULT/g",
        "rule:[1:$1]", "rule:[1:$1]/L/U", "rule:[1:$1]/U/L", "rule:[1:$1]/LU",
        "RULE:[1:$1/L", "RULE:[1:$1]/l", "RULE:[2:$1](ABC.*)s/ABC/XYZ/L/g",
        "RULE:[:$1]", "RULE:[1:$1] ",
    ],
)
def test_malformed_rules_are_rejected_when_loaded(rule: str) -> None:
    with pytest.raises(KerberosRuleError):
        namer(rule)


# -- rule semantics ----------------------------------------------------------------------------


def test_first_matching_rule_wins() -> None:
    rules = namer("RULE:[1:$1](a.*)s/.*/first/", "RULE:[1:$1](al.*)s/.*/second/", "DEFAULT")
    assert rules.short_name("alice@REALM.COM") == "first"


def test_substitution_replaces_the_first_match_unless_g_is_given() -> None:
    assert namer("RULE:[1:$1]s/a/x/").short_name("banana@R") == "bxnana"
    assert namer("RULE:[1:$1]s/a/x/g").short_name("banana@R") == "bxnxnx"


def test_match_pattern_must_match_the_whole_formatted_name() -> None:
    rules = namer("RULE:[1:$1@$0](alice)s/.*/matched/", "DEFAULT")
    assert rules.short_name("alice@REALM.COM") == "alice"  # "alice@REALM.COM" is not fully "alice"


def test_rule_applies_only_to_names_with_its_number_of_components() -> None:
    rules = namer("RULE:[2:$2]", "DEFAULT")
    assert rules.short_name("kafka/broker1@REALM.COM") == "broker1"
    assert rules.short_name("kafka@REALM.COM") == "kafka"


def test_format_can_reorder_components_and_realm() -> None:
    rules = namer("RULE:[2:$2.$1.$0]")
    assert rules.short_name("svc/host@R") == "host.svc.R"


def test_java_replacement_refers_to_numbered_and_named_groups() -> None:
    assert namer("RULE:[2:$1;$2]s/(.*);(.*)/$2-$1/").short_name("svc/host@R") == "host-svc"
    assert namer("RULE:[2:$1;$2]s/(?<a>.*);(?<b>.*)/${b}_${a}/").short_name("svc/host@R") == "host_svc"
    assert namer("RULE:[1:$1]s/(.*)/\\$$1/").short_name("alice@R") == "$alice"


def test_a_non_simple_result_fails_instead_of_trying_later_rules() -> None:
    rules = namer("RULE:[1:$1@$0](.*)", "DEFAULT")
    with pytest.raises(NoMatchingKerberosRule, match=r"Non-simple name alice@REALM\.COM"):
        rules.short_name("alice@REALM.COM")


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ("RULE:[1:$2]", "outside of the valid range 0 to 1"),
        ("RULE:[1:$a]", "bad format"),
        ("RULE:[1:$1]s/(a)/$2/", "refers to group 2"),
        ("RULE:[1:$1]s/a/${x}/", "names no group"),
        ("RULE:[1:$1]s/a/b\\/", "ends with an unescaped"),
        ("RULE:[1:$1](a[)", "invalid regular expression"),
    ],
)
def test_rule_errors_java_would_raise_on_first_use_are_reported_at_load(rule: str, message: str) -> None:
    with pytest.raises(KerberosRuleError, match=message):
        namer(rule)


def test_config_string_is_split_like_kafkas_list_type() -> None:
    assert split_rules(" RULE:[1:$1@$0](.*@MYDOMAIN.COM)s/@.*// ,  DEFAULT ") == [
        "RULE:[1:$1@$0](.*@MYDOMAIN.COM)s/@.*//",
        "DEFAULT",
    ]
    assert split_rules("   ") == []


def test_namer_is_a_callable_for_the_principal_builder() -> None:
    assert namer("DEFAULT")("bob/host@REALM.COM") == "bob"
