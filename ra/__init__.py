"""Raft as rabbitmq/ra does it.

The consensus core (`ra.server`) is pure: events in, ``(raft_state, state,
effects)`` out, with time and randomness injected. Processes that run it only
execute effects; that split is what makes table tests, deterministic replay
and the simulation in `ra.sim` possible.
"""
