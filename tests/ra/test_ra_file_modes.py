"""Ra's storage files are its owner's only, whatever the umask (`ra.durable`).

Every file of the log stack is made 0600 and every directory 0700 through these
helpers, and `restrict_tree` tightens a store an older warren wrote with the
umask's modes.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from ra import durable
from transports.cookie import load_cookie


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    """A umask that takes nothing away, as a careless service manager may set."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def test_files_are_0600_even_when_they_were_there_with_another_mode(
        tmp_path: Path, open_umask: None) -> None:
    durable.write_file(str(tmp_path / "new"), b"x", None)
    durable.replace_file(str(tmp_path / "replaced"), b"x", os.fsync)
    old = tmp_path / "old"
    old.write_bytes(b"before")
    old.chmod(0o644)
    durable.write_file(str(old), b"after", None)
    os.close(durable.open_private(str(tmp_path / "opened"), os.O_WRONLY | os.O_CREAT))
    assert {p.name: oct(mode(p)) for p in tmp_path.iterdir()} == dict.fromkeys(
        ["new", "replaced", "old", "opened"], "0o600")


def test_every_directory_make_dirs_creates_is_0700(tmp_path: Path, open_umask: None) -> None:
    durable.make_dirs(str(tmp_path / "a" / "b" / "c"))
    durable.make_dirs(str(tmp_path / "a" / "b" / "c"))  # already there: fine
    assert [oct(mode(tmp_path / p)) for p in ("a", "a/b", "a/b/c")] == ["0o700"] * 3


def test_restrict_tree_tightens_what_an_older_warren_left(tmp_path: Path) -> None:
    root = tmp_path / "ra"
    (root / "wal").mkdir(parents=True)
    (root / "wal" / "0000000000000001.wal").write_bytes(b"w")
    (root / "names").write_bytes(b"n")
    outside = tmp_path / "outside"
    outside.write_bytes(b"o")
    (root / "link").symlink_to(outside)
    for p in (root, root / "wal", root / "wal" / "0000000000000001.wal", root / "names",
              outside):
        p.chmod(0o755 if p.is_dir() else 0o644)
    durable.restrict_tree(str(root))
    assert [oct(mode(p)) for p in (root, root / "wal")] == ["0o700"] * 2
    assert [oct(mode(p)) for p in (root / "wal" / "0000000000000001.wal", root / "names")] \
        == ["0o600"] * 2
    assert mode(outside) == 0o644  # a link is not followed


def test_the_cookie_file_is_created_0600_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o277)  # would leave a read-only file
    try:
        load_cookie(env={}, home=tmp_path)
    finally:
        os.umask(old)
    assert mode(tmp_path / ".warren.cookie") == 0o600
