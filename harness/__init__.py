"""warren's test harness: scenarios, workload clients, the nemesis and the runner.

A scenario starts a local cluster of real node processes, drives it with real AMQP
clients (pika) in processes of their own, injects faults on a schedule, drains,
stops, and hands the recorded history to the analysis. The harness imports the
broker only as processes and commands (`harness.cluster` is the one place that
knows them) and the analysis only for recording and compaction; the checks run
in a process of their own.
"""
