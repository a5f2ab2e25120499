"""The metadata machine's limit commands behind `warren ctl set_vhost_limits` and
`set_user_limits`: vhost limits replace, user limits merge (as `rabbit_vhost_limit`
and `internal_user:update_limits` do)."""

from __future__ import annotations

from channel.access.auth import User, password_ok
from channel.access.passwords import hash_password
from tests.broker.store_support import Store


def test_vhost_limits_replace_the_previous_definition_and_clear() -> None:
    st = Store()
    assert st.apply(("set_vhost_limits", "/", {"max-connections": 10, "max-queues": 5})) == "ok"
    assert st.apply(("set_vhost_limits", "/", {"max-queues": 1})) == "ok"
    assert dict(st.state.vhost_limits) == {"/": {"max-queues": 1}}
    assert st.apply(("clear_vhost_limits", "/")) == "ok"
    assert dict(st.state.vhost_limits) == {}
    assert st.apply(("clear_vhost_limits", "/")) == ("error", "not_found")


def test_vhost_limits_of_an_unknown_vhost_are_refused() -> None:
    reply = Store().apply(("set_vhost_limits", "nope", {"max-queues": 1}))
    assert reply == ("error", ("NOT_FOUND", "no vhost 'nope'"))


def test_user_limits_merge_and_clear_one_or_all() -> None:
    st = Store()
    st.apply(("add_user", User("bob", hash_password("pw"))))
    assert st.apply(("set_user_limits", "bob", {"max-connections": 2})) == "ok"
    assert st.apply(("set_user_limits", "bob", {"max-channels": 3, "max-connections": 4})) == "ok"
    assert dict(st.state.users["bob"].limits) == {"max-connections": 4, "max-channels": 3}
    assert st.apply(("clear_user_limits", "bob", "max-channels")) == "ok"
    assert st.apply(("clear_user_limits", "bob", "max-unknown")) == "ok"  # not validated
    assert dict(st.state.users["bob"].limits) == {"max-connections": 4}
    st.apply(("set_user_limits", "bob", {"max-channels": 1}))
    assert st.apply(("clear_user_limits", "bob", "all")) == "ok"
    assert dict(st.state.users["bob"].limits) == {}
    assert password_ok(st.state.users["bob"], "pw")


def test_user_limits_of_an_unknown_user_are_refused() -> None:
    st = Store()
    assert st.apply(("set_user_limits", "nobody", {"max-channels": 1})) == (
        "error", "no_such_user")
    assert st.apply(("clear_user_limits", "nobody", "all")) == ("error", "no_such_user")
