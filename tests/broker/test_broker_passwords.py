"""Users keep salted password hashes, never passwords: how a hash is made and
checked, what `warren ctl` sends, and how the metadata store converts the
cleartext records an older warren stored."""

from __future__ import annotations

import argparse
import base64
import hashlib
import pickle
from typing import Any

import pytest

from broker import ctl
from broker.metadata import MetadataMachine, MetadataState
from channel.access.auth import LoginRefused, User, Users, check_login, default_user, password_ok
from channel.access.passwords import hash_password, password_matches
from channel.access.permissions import ALL
from tests.broker.legacy_store import older_warren_pickle

M = MetadataMachine()
SECRET = "correct horse battery staple"


class Store:
    """The metadata machine applied at rising indexes; keeps the last effects."""

    def __init__(self, state: MetadataState | None = None) -> None:
        self.state = state if state is not None else M.init({})
        self.index = 0
        self.effects: list[Any] = []

    def apply(self, cmd: Any) -> Any:
        self.index += 1
        self.state, (_index, reply), self.effects = M.apply({"index": self.index}, cmd,
                                                            self.state)
        return reply


def old_record(name: str, password: str) -> User:
    """A user as an older warren stored it (`tests.broker.legacy_store`)."""
    user = pickle.loads(older_warren_pickle(name, password))
    assert isinstance(user, User)
    return user


def login(users: Users, name: str, password: str) -> User:
    return check_login(users, "PLAIN", f"\0{name}\0{password}", "127.0.0.1")


# ---------------------------------------------------------------- the hash


def test_a_hash_is_base64_of_a_4_byte_salt_and_sha256_of_salt_and_password() -> None:
    raw = base64.b64decode(hash_password(SECRET))
    salt, digest = raw[:4], raw[4:]
    assert len(raw) == 36
    assert digest == hashlib.sha256(salt + SECRET.encode()).digest()


def test_each_hash_of_the_same_password_has_its_own_salt() -> None:
    assert hash_password(SECRET) != hash_password(SECRET)


def test_a_hash_matches_its_password_only() -> None:
    stored = hash_password(SECRET)
    assert password_matches(stored, "rabbit_password_hashing_sha256", SECRET)
    assert not password_matches(stored, "rabbit_password_hashing_sha256", SECRET + "!")
    assert not password_matches(stored, "rabbit_password_hashing_sha512", SECRET)
    assert not password_matches("", "rabbit_password_hashing_sha256", "")  # cleared
    assert not password_matches("not base64!", "rabbit_password_hashing_sha256", SECRET)


def test_a_hash_exported_by_rabbitmq_logs_in() -> None:
    """RabbitMQ's definitions carry the same base64 text (here a SHA-512 one)."""
    salt = b"\x01\x02\x03\x04"
    exported = base64.b64encode(salt + hashlib.sha512(salt + b"pw").digest()).decode()
    user = User("imported", exported, hashing_algorithm="rabbit_password_hashing_sha512")
    assert password_ok(user, "pw") and not password_ok(user, "pW")


# ------------------------------------------------------------------ logins


def test_login_with_the_right_password_and_not_with_another() -> None:
    users = Users({"bob": User("bob", hash_password(SECRET), {"/": ALL})}, frozenset())
    assert login(users, "bob", SECRET).name == "bob"
    with pytest.raises(LoginRefused, match="invalid credentials"):
        login(users, "bob", "wrong")
    with pytest.raises(LoginRefused, match="blank password"):
        login(users, "bob", "")


def test_the_default_user_is_guest_guest_with_the_same_record_on_every_member() -> None:
    assert default_user() == default_user()  # a machine's init is deterministic
    assert login(Users.default(), "guest", "guest").name == "guest"
    assert "guest" not in base64.b64decode(default_user().password_hash).decode("latin-1")


def test_a_user_shows_neither_its_password_nor_its_hash() -> None:
    user = User("bob", hash_password(SECRET))
    assert user.password_hash not in repr(user)
    assert SECRET not in repr(old_record("old", SECRET))


# ------------------------------------------------------- warren ctl sends hashes


@pytest.mark.parametrize("command", ["add_user", "change_password"])
def test_the_cli_hashes_the_password_before_the_command_leaves_it(command: str) -> None:
    function, arguments = ctl.COMMANDS[command]
    sent = arguments(argparse.Namespace(username="bob", password=SECRET))
    assert SECRET not in repr(sent)
    name, password_hash, algorithm = sent
    assert (name, algorithm) == ("bob", "rabbit_password_hashing_sha256")
    assert password_matches(password_hash, algorithm, SECRET)
    assert function in ("add_user", "change_password_hash")


def test_change_and_clear_password() -> None:
    st = Store()
    st.apply(("add_user", User("bob", hash_password("old"))))
    assert st.apply(("change_password_hash", "bob", hash_password("new"),
                     "rabbit_password_hashing_sha256")) == "ok"
    assert password_ok(st.state.users["bob"], "new")
    assert not password_ok(st.state.users["bob"], "old")
    _function, arguments = ctl.COMMANDS["clear_password"]
    assert st.apply(("change_password_hash", *arguments(argparse.Namespace(
        username="bob")))) == "ok"
    assert not password_ok(st.state.users["bob"], "new")
    assert not password_ok(st.state.users["bob"], "")
    assert st.apply(("change_password_hash", "nobody", "", "rabbit_password_hashing_sha256",
                     )) == ("error", "no_such_user")


# ------------------------------------------- records stored by an older warren


def test_a_record_stored_by_an_older_warren_reads_as_cleartext_and_still_logs_in() -> None:
    user = old_record("old", SECRET)
    assert user.is_cleartext and dict(user.permissions) == {"/": ALL}
    users = Users({"old": user}, frozenset())
    assert login(users, "old", SECRET).name == "old"
    with pytest.raises(LoginRefused):
        login(users, "old", "wrong")


def test_the_leader_hands_cleartext_records_to_its_node_on_each_tick() -> None:
    st = Store()
    st.apply(("add_user", User("new", hash_password("pw"))))
    assert M.tick(0, st.state) == []
    old = old_record("old", SECRET)
    st.apply(("add_user", old))
    assert M.tick(1000, st.state) == [("mod_call", "broker.users", "hash_passwords", [(old,)])]


def test_hash_passwords_replaces_the_cleartext_and_releases_the_log_up_to_it() -> None:
    st = Store()
    st.apply(("add_user", old_record("old", SECRET)))
    assert SECRET.encode() in pickle.dumps(st.state)
    conversion = ("old", hash_password(SECRET), "rabbit_password_hashing_sha256")
    assert st.apply(("hash_passwords", (conversion,))) == "ok"
    user = st.state.users["old"]
    assert not user.is_cleartext and password_ok(user, SECRET)
    assert dict(user.permissions) == {"/": ALL}
    assert SECRET.encode() not in pickle.dumps(st.state)
    assert ("release_cursor", st.index, st.state) in st.effects
    assert M.tick(2000, st.state) == []
    before = st.state
    assert st.apply(("hash_passwords", (conversion,))) == "ok"  # a second one changes nothing
    assert st.state is before and not any(e[0] == "release_cursor" for e in st.effects)


def test_hash_passwords_leaves_a_record_whose_password_the_hash_is_not_of() -> None:
    st = Store()
    st.apply(("add_user", old_record("old", SECRET)))
    wrong = ("old", hash_password("something else"), "rabbit_password_hashing_sha256")
    assert st.apply(("hash_passwords", (wrong, ("nobody", hash_password("x"),
                                                "rabbit_password_hashing_sha256")))) == "ok"
    assert st.state.users["old"].is_cleartext and "nobody" not in st.state.users
    assert not any(e[0] == "release_cursor" for e in st.effects)
