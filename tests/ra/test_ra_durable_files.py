"""Whole files on disk (`ra.durable`): written in full, synced, and never seen half-done.

Segments, the names and config files, the metadata row and snapshots all go through
these helpers, so the properties here hold for every one of them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from ra import durable
from ra.log_meta import LogMeta


def short_writes(monkeypatch: pytest.MonkeyPatch, at_most: int = 3) -> None:
    """Make `os.write` write at most `at_most` bytes a call, as a kernel may."""
    real = os.write

    def write(fd: int, data: Any) -> int:
        return real(fd, bytes(data[:at_most]))

    monkeypatch.setattr(os, "write", write)


def test_replace_file_writes_every_byte_even_when_writes_come_up_short(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    short_writes(monkeypatch)
    path = tmp_path / "f"
    durable.replace_file(str(path), b"0123456789" * 7, os.fsync)
    assert path.read_bytes() == b"0123456789" * 7
    assert os.listdir(tmp_path) == ["f"]  # no temporary name left behind


def test_the_metadata_row_survives_short_writes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    short_writes(monkeypatch)
    meta = LogMeta(str(tmp_path))
    meta.store("current_term", 7)
    meta.store_sync("voted_for", ("s2", "n2@127.0.0.1"))
    again = LogMeta(str(tmp_path))
    assert again.fetch("current_term") == 7
    assert again.fetch("voted_for") == ("s2", "n2@127.0.0.1")


def test_the_file_is_synced_by_the_callers_fsync_and_the_rename_by_the_directorys(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[str] = []
    real = os.fsync

    def dir_fsync(fd: int) -> None:
        synced.append("directory")
        real(fd)

    def file_fsync(fd: int) -> None:
        # the data is synced under its temporary name, before the rename
        assert not (tmp_path / "f").exists()
        synced.append("file")
        real(fd)

    monkeypatch.setattr(os, "fsync", dir_fsync)
    durable.replace_file(str(tmp_path / "f"), b"x", file_fsync)
    assert synced == ["file", "directory"]


def test_a_failed_sync_leaves_the_old_contents_in_place(tmp_path: Path) -> None:
    path = tmp_path / "f"
    durable.replace_file(str(path), b"old", os.fsync)

    def failing(_fd: int) -> None:
        raise OSError(5, "Input/output error")

    with pytest.raises(OSError):
        durable.replace_file(str(path), b"new", failing)
    assert path.read_bytes() == b"old"


def test_write_file_without_fsync_only_writes(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"a longer old content")
    durable.write_file(str(path), b"short", None)
    assert path.read_bytes() == b"short"  # truncated, not overwritten in place
