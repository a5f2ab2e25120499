"""The matching rules of topic permissions, without a broker
(`rabbit_auth_backend_internal:check_topic_access`, `expand_topic_permission`,
`rabbit_re:escape`)."""

from __future__ import annotations

import pytest

from channel.access.auth import User
from channel.access.permissions import ALL
from channel.access.topic_permissions import (
    TopicPermission,
    check_topic_access,
    escape,
    expand_topic_permission,
    topic_access_allowed,
    validate_pattern,
)
from channel.errors import AmqpError

VARS = {"username": "u", "vhost": "/"}


def allowed(perm: TopicPermission | None, which: str, key: str,
            variables: dict[str, str] = VARS) -> bool:
    return topic_access_allowed(perm, which, key, variables)


def test_escape_makes_every_metacharacter_and_the_dash_literal() -> None:
    assert escape(r"a\^$.|?*+()[]{}-z") == r"a\\\^\$\.\|\?\*\+\(\)\[\]\{\}\-z"
    assert escape("plain_name/with:colons#and spaces") == "plain_name/with:colons#and spaces"


def test_expansion_replaces_every_occurrence_with_the_escaped_value() -> None:
    pattern = expand_topic_permission("^{username}\\.{vhost}\\.{username}$",
                                      {"username": "a.b", "vhost": "v-1"})
    assert pattern == r"^a\.b\.v\-1\.a\.b$"


def test_unknown_variables_are_left_as_written() -> None:
    assert expand_topic_permission("^{client_id}\\.", VARS) == "^{client_id}\\."


def test_an_expanded_value_is_not_expanded_again() -> None:
    # username comes first and is escaped, so its "{vhost}" no longer reads as a variable
    variables = {"username": "{vhost}", "vhost": "/"}
    assert expand_topic_permission("^{username}$", variables) == r"^\{vhost\}$"
    assert allowed(TopicPermission("^{username}$", ""), "write", "{vhost}", variables)
    assert not allowed(TopicPermission("^{username}$", ""), "write", "/", variables)


def test_a_user_name_with_metacharacters_matches_only_itself() -> None:
    perm = TopicPermission("^{username}\\.", "")
    assert allowed(perm, "write", "a.b.x", {"username": "a.b", "vhost": "/"})
    assert not allowed(perm, "write", "axb.x", {"username": "a.b", "vhost": "/"})


def test_no_topic_permission_allows_everything() -> None:
    assert allowed(None, "write", "any.key")
    assert allowed(None, "read", "")


def test_the_expression_is_searched_for_anywhere_in_the_key() -> None:
    perm = TopicPermission("b", "^x$")
    assert allowed(perm, "write", "a.b.c")
    assert not allowed(perm, "write", "a.c")
    assert allowed(perm, "read", "x") and not allowed(perm, "read", "x.y")


def test_an_empty_expression_allows_only_the_empty_key() -> None:
    perm = TopicPermission("", "")
    assert allowed(perm, "write", "")
    assert not allowed(perm, "write", "a")
    assert not allowed(perm, "read", "a")


def test_a_broken_expression_refuses() -> None:
    assert not allowed(TopicPermission("(", ".*"), "write", "(")
    assert allowed(TopicPermission("(", ".*"), "read", "(")


def test_validation_gives_the_reason_or_none() -> None:
    assert validate_pattern("^a\\.{username}$") is None
    assert validate_pattern("") is None
    assert validate_pattern("[") is not None
    assert validate_pattern("a" * 1025) == "pattern_too_long"
    assert validate_pattern("a" * 1024) is None


def user(topic: dict[str, dict[str, TopicPermission]]) -> User:
    return User("u", "p", {"/": ALL, "v": ALL}, topic_permissions=topic)


def test_refusal_is_rabbitmqs_403_with_the_topic_in_the_exchange() -> None:
    u = user({"/": {"t": TopicPermission("^a", "^b")}})
    check_topic_access(u, "/", "t", "a.1", "write")
    check_topic_access(u, "/", "t", "b.1", "read")
    with pytest.raises(AmqpError) as info:
        check_topic_access(u, "/", "t", "b.1", "write")
    assert (info.value.code, info.value.explanation) == (
        403, "write access to topic 'b.1' in exchange 't' in vhost '/' refused for user 'u'")
    with pytest.raises(AmqpError) as info:
        check_topic_access(u, "/", "t", "a.1", "read")
    assert info.value.explanation == (
        "read access to topic 'a.1' in exchange 't' in vhost '/' refused for user 'u'")


def test_permissions_are_per_vhost_and_per_exchange() -> None:
    u = user({"/": {"t": TopicPermission("^a", "^a")}})
    check_topic_access(u, "/", "other", "z", "write")
    check_topic_access(u, "v", "t", "z", "write")
    with pytest.raises(AmqpError):
        check_topic_access(u, "/", "t", "z", "write")


def test_the_vhost_variable_is_the_checked_vhost() -> None:
    u = user({"v": {"t": TopicPermission("^{vhost}\\.", "")}})
    check_topic_access(u, "v", "t", "v.x", "write")
    with pytest.raises(AmqpError):
        check_topic_access(u, "v", "t", "w.x", "write")
