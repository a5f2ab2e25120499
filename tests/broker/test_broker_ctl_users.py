"""The metadata machine's user commands behind `warren ctl add_user` and friends."""

from __future__ import annotations

from channel.access.auth import User, password_ok
from channel.access.passwords import hash_password
from channel.access.permissions import ALL, Permission
from tests.broker.store_support import Store


def test_first_boot_guest_is_an_administrator_with_everything_on_slash() -> None:
    guest = Store().state.users["guest"]
    assert guest.tags == ("administrator",) and dict(guest.permissions) == {"/": ALL}


def test_add_user_refuses_an_existing_user() -> None:
    st = Store()
    assert st.apply(("add_user", User("bob", hash_password("pw")))) == "ok"
    assert st.apply(("add_user", User("bob", hash_password("other")))) == (
        "error", "user_already_exists")
    assert password_ok(st.state.users["bob"], "pw")


def test_tags_and_permissions_replace_per_vhost_and_clear() -> None:
    st = Store()
    st.apply(("add_user", User("bob", "pw")))
    st.apply(("add_vhost", "v"))
    assert st.apply(("set_user_tags", "bob", ["management"])) == "ok"
    assert st.apply(("set_permissions", "bob", "/", Permission("^a", "^b", "^c"))) == "ok"
    assert st.apply(("set_permissions", "bob", "v", ALL)) == "ok"
    assert st.apply(("set_permissions", "bob", "/", Permission("", ".*", ""))) == "ok"
    bob = st.state.users["bob"]
    assert bob.tags == ("management",)
    assert dict(bob.permissions) == {"/": Permission("", ".*", ""), "v": ALL}
    assert st.apply(("clear_permissions", "bob", "/")) == "ok"
    assert dict(st.state.users["bob"].permissions) == {"v": ALL}


def test_unknown_users_and_vhosts_are_refused() -> None:
    st = Store()
    assert st.apply(("set_user_tags", "nobody", [])) == ("error", "no_such_user")
    assert st.apply(("set_permissions", "nobody", "/", ALL)) == ("error", "no_such_user")
    reply = st.apply(("set_permissions", "guest", "nope", ALL))
    assert reply == ("error", ("NOT_FOUND", "no vhost 'nope'"))
