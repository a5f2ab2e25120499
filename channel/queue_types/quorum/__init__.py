"""Quorum queues (`rabbit_quorum_queue`): the backend over `fifo`'s Ra clusters,
where replicas live, the queue table, deletion and dead lettering.
"""
