"""Entries pickled once: AppendEntries to several followers and a follower's WAL
record of the run it received share one pickle of that run (`ra.packed`)."""

from __future__ import annotations

import pickle

from ra import replication
from ra import server as core
from ra.packed import PackedEntries
from ra.types import AppendEntriesRpc
from tests.ra.ra_testlib import S1, S2, S3, entries, leader, rpcs, server


def test_a_packed_run_is_its_tuple_and_pickles_its_entries_once() -> None:
    run = PackedEntries(entries(1, 1))
    assert run == tuple(entries(1, 1))
    data = pickle.dumps(run)
    blob = run.__dict__["blob"]
    pickle.dumps([run, run])
    assert run.__dict__["blob"] is blob
    back = pickle.loads(data)
    assert type(back) is PackedEntries and back == run
    # received and written again (a follower's WAL record): the same bytes inside
    assert back.__dict__["blob"] == blob and blob in pickle.dumps(back)


def test_followers_that_need_the_same_run_get_one_packed_entries() -> None:
    st = leader(log=entries(1, 1, 1))
    for peer in (S2, S3):
        st.cluster[peer].next_index, st.cluster[peer].match_index = 1, 0
    _, effects = replication.make_pipelined_rpc_effects(st, [])
    sent = rpcs(effects)
    assert sent[S2].entries == tuple(entries(1, 1, 1))
    assert isinstance(sent[S2].entries, PackedEntries) and sent[S3].entries is sent[S2].entries


def test_followers_at_different_points_get_their_own_runs() -> None:
    st = leader(log=entries(1, 1, 1))
    st.cluster[S2].next_index, st.cluster[S2].match_index = 1, 0
    st.cluster[S3].next_index, st.cluster[S3].match_index = 3, 2
    sent = rpcs(replication.make_pipelined_rpc_effects(st, [])[1])
    assert sent[S2].entries == tuple(entries(1, 1, 1))
    assert sent[S3].entries == tuple(entries(1, first=3))


def test_a_follower_hands_a_packed_run_to_the_wal_as_received() -> None:
    st = server(S2, log=entries(1), term=1)
    run = pickle.loads(pickle.dumps(PackedEntries(entries(1, 1, first=2))))
    core.handle("follower", AppendEntriesRpc(1, S1, 0, 1, 1, run), st)
    assert st.log.take_wal_writes()[0] is run


def test_a_wal_record_of_a_packed_run_embeds_its_pickle_and_reads_back(tmp_path: object) -> None:
    from pathlib import Path

    from ra import wal_file

    run = PackedEntries(entries(1, 1))
    pickle.dumps(run)  # as the AppendEntries that brought it did
    data = wal_file.encode([("uid", run)])
    assert run.__dict__["blob"] in data
    path = Path(str(tmp_path)) / wal_file.file_name(1)
    path.write_bytes(wal_file.HEADER + data)
    assert wal_file.read(str(path)).batches == [[("uid", tuple(entries(1, 1)))]]


def test_a_leaders_wal_batch_reuses_the_run_its_appendentries_carried() -> None:
    st = leader(log=entries(1, 1, 1))
    st.log.append(entries(1, first=4)[0])
    st.log.append(entries(1, first=5)[0])
    sent = rpcs(replication.make_pipelined_rpc_effects(st, [])[1])
    assert sent[S2].entries == tuple(entries(1, 1, first=4))
    (batch,) = st.log.take_wal_writes()
    assert batch is sent[S2].entries and batch is sent[S3].entries
    assert st.log.take_wal_writes() == []  # handed over once


def test_a_wal_batch_of_other_entries_than_the_run_sent_stays_as_it_is() -> None:
    st = leader(log=entries(1, 1, 1))
    st.cluster[S2].next_index = st.cluster[S3].next_index = 3
    st.log.append(entries(1, first=4)[0])
    sent = rpcs(replication.make_pipelined_rpc_effects(st, [])[1])
    assert sent[S2].entries == tuple(entries(1, 1, first=3))
    (batch,) = st.log.take_wal_writes()
    assert batch == entries(1, first=4) and not isinstance(batch, PackedEntries)
