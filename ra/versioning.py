"""Machine versioning (see docs/ra.md): when a cluster may move to newer machine code.

Every member runs code that supports machine versions up to its
``cfg.machine_version``; the cluster runs the *effective* version, which only
an applied ``noop`` entry raises. Under the ``all`` upgrade strategy (Ra's
default and RabbitMQ's setting) a leader learns what each peer's code
supports by asking it (``info_rpc`` / ``info_reply``, keys
``["machine_version"]``) and appends a noop carrying a higher version only
once every member supports it. Under ``quorum`` (or in a single-member
cluster) a new leader's noop carries its own latest version right away:
members with older code then stop applying until they are restarted with
newer code.

Asking is repeated on every leader tick for a peer whose version is unknown
or older than the leader's, so a peer restarted with newer code is noticed
without a new election. Everything here is pure: it reads and updates the
`ServerState` and returns effects.
"""

from __future__ import annotations

from typing import Any

from ra import machine as ra_machine
from ra.effect_types import Effect
from ra.state import ServerState
from ra.types import InfoReply, InfoRpc, ServerId, noop

Effects = list[Effect]

#: ``machine_upgrade_strategy`` values (``ra_system`` config); ``all`` is the default.
ALL = "all"
QUORUM = "quorum"
#: Info keys a member answers in an `InfoReply`.
MACHINE_VERSION_KEY = "machine_version"


def upgrade_strategy(s: ServerState) -> str:
    return str(s.cfg.system_config.get("machine_upgrade_strategy", ALL))


def post_election_effects(s: ServerState) -> Effects:
    """The new leader's noop (``ra_server:become_leader``) and, under ``all``, its info requests.

    Alone, or under ``quorum``, the leader announces its own latest version;
    otherwise the noop keeps the effective version and the peers are asked
    what they support (`handle_info_reply` then decides on an upgrade).
    """
    if not s.peers() or upgrade_strategy(s) == QUORUM:
        return [("next_event", "cast", ("command", noop(s.now_ms, s.cfg.machine_version)))]
    effect: Effect = ("next_event", "cast",
                      ("command", noop(s.now_ms, s.cfg.effective_machine_version)))
    return [effect, *info_rpc_effects(s)]


def info_rpc_effects(s: ServerState) -> Effects:
    """Ask every peer whose supported version is unknown, or older than this
    member's code (it may have been restarted with newer code since)."""
    effects: Effects = []
    ours = s.cfg.machine_version
    for peer_id, peer in s.peers().items():
        if peer.machine_version is None or peer.machine_version < ours:
            rpc = InfoRpc(from_=s.id, term=s.current_term, keys=(MACHINE_VERSION_KEY,))
            effects.append(("send_rpc", peer_id, rpc))
    return effects


def server_info(s: ServerState, keys: tuple[str, ...]) -> dict[str, Any]:
    """What this member reports about itself, restricted to the asked `keys`
    (a member ignores keys it does not know)."""
    info = {MACHINE_VERSION_KEY: s.cfg.machine_version}
    return {key: value for key, value in info.items() if key in keys}


def info_reply_effect(rpc: InfoRpc, s: ServerState) -> Any:
    """A leader or follower answers with its info."""
    reply = InfoReply(from_=s.id, term=s.current_term, keys=rpc.keys,
                      info=server_info(s, rpc.keys))
    return ("cast", rpc.from_, reply)


def empty_info_reply_effect(rpc: InfoRpc, s: ServerState) -> Any:
    """A candidate, pre-voting or snapshot-receiving member answers without
    info; the asker forgets what it knew and asks again on its next tick."""
    return ("cast", rpc.from_, InfoReply(from_=s.id, term=s.current_term, keys=rpc.keys))


def handle_info_reply(reply: InfoReply, s: ServerState) -> Effects:
    """Record a peer's info (keys it did not report are forgotten) and append
    an upgrading noop if the whole cluster now supports a newer version.

    A reply from a member removed since it was asked is ignored.
    """
    peer = s.cluster.get(reply.from_)
    if peer is None:
        return []
    for key in reply.keys:
        if key == MACHINE_VERSION_KEY:
            value = reply.info.get(key)
            peer.machine_version = None if value is None else int(value)
    return upgrade_effects(s)


def max_supported_machine_version(s: ServerState) -> int:
    """The newest version every member's code supports, as far as this leader
    knows; while any peer's version is unknown, the effective version."""
    best = s.cfg.machine_version
    for peer in s.peers().values():
        if peer.machine_version is None:
            return min(best, s.cfg.effective_machine_version)
        best = min(best, peer.machine_version)
    return best


def upgrade_effects(s: ServerState) -> Effects:
    """A noop announcing the new version when the cluster can move forward.

    Several replies may each append one before the first is applied; applying
    a noop that does not raise the effective version changes nothing.
    """
    target = max_supported_machine_version(s)
    if target > s.cfg.effective_machine_version:
        return [("next_event", "cast", ("command", noop(s.now_ms, target)))]
    return []


def validate_config(config: dict[str, Any], system_config: dict[str, Any]) -> Any:
    """``ra_server_sup_sup:validate_config``: under the ``all`` strategy a new
    server may not start its cluster at a version its code does not support.

    Returns ``"ok"`` or ``("error", "invalid_initial_machine_version")``.
    """
    strategy = system_config.get("machine_upgrade_strategy", ALL)
    initial = config.get("initial_machine_version")
    too_new = initial is not None and ra_machine.version(config["machine"]) < int(initial)
    if strategy == ALL and too_new:
        return ("error", "invalid_initial_machine_version")
    return "ok"


def peer_machine_versions(s: ServerState) -> dict[ServerId, int | None]:
    """What this member knows of each peer's supported version (overview)."""
    return {sid: peer.machine_version for sid, peer in s.peers().items()}
