"""``rabbit_fifo``: the quorum-queue state machine (machine version 7 by default).

Pure data in, ``(state, reply, effects)`` out: see `fifo.machine.RabbitFifo`.
"""

from fifo.commands import (
    get_msg,
    make_checkout,
    make_credit,
    make_discard,
    make_dlx_checkout,
    make_dlx_settle,
    make_enqueue,
    make_garbage_collection,
    make_modify,
    make_purge,
    make_purge_nodes,
    make_register_enqueuer,
    make_requeue,
    make_return,
    make_settle,
    make_update_config,
)
from fifo.machine import MACHINE_VERSION, RabbitFifo
from fifo.records import (
    Cfg,
    Consumer,
    ConsumerCfg,
    DlxConsumer,
    Enqueuer,
    RabbitFifoDlx,
    RabbitFifoState,
    copy_state,
)

__all__ = [
    "MACHINE_VERSION",
    "Cfg",
    "Consumer",
    "ConsumerCfg",
    "DlxConsumer",
    "Enqueuer",
    "RabbitFifo",
    "RabbitFifoDlx",
    "RabbitFifoState",
    "copy_state",
    "get_msg",
    "make_checkout",
    "make_credit",
    "make_discard",
    "make_dlx_checkout",
    "make_dlx_settle",
    "make_enqueue",
    "make_garbage_collection",
    "make_modify",
    "make_purge",
    "make_purge_nodes",
    "make_register_enqueuer",
    "make_requeue",
    "make_return",
    "make_settle",
    "make_update_config",
]
