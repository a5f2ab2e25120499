"""Which releases confirm a durable classic queue's persistent messages only after a
sync: the node's message store is started from the release record's choice."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from channel.protocol.framing import Content
from channel.queue_types.backend import Message
from channel.queue_types.classic.classic_store import child_specs, decode_content, encode_content
from releases.table import RELEASES


class _Classic:
    store = None


class _Backend:
    classic = _Classic()


@pytest.mark.parametrize(("series", "fsync"), [("3.10", os.fsync), ("4.0", None),
                                               ("4.2", None), ("4.3", None)])
def test_the_store_syncs_before_confirming_only_where_the_release_did(
        tmp_path: Path, series: str, fsync: object) -> None:
    release = RELEASES[series]
    store, _recovery = child_specs(_Backend(), str(tmp_path),
                                   release.classic_confirm_after_fsync)
    _start, (root, _name, given) = store["start"]
    assert given is fsync
    assert root == str(tmp_path / "msg_stores" / "vhosts")


def test_no_store_without_a_data_dir() -> None:
    assert child_specs(_Backend(), None) == []


def test_a_message_comes_back_from_its_stored_bytes() -> None:
    message = Message("ex", "rk", Content(b"\x80\x00\x02", b"body"), ("rk", "cc"))
    back = decode_content(encode_content(message))
    assert (back.exchange, back.routing_key, back.routing_keys) == ("ex", "rk", ("rk", "cc"))
    assert (back.content.properties_bin, back.content.body) == (b"\x80\x00\x02", b"body")
