"""The `warren` command line.

    warren demo                       three node processes, a ring of messages,
                                      a SIGKILL, a restart (the runtime demo)
    warren node start --name N@H:P    run one broker node until SIGTERM / SIGINT
    warren ctl --node N@H:P COMMAND   operate a running cluster (see broker.ctl)
    warren scenario list | run NAME   a local cluster, a workload, faults, the verdict
    warren analyze RUN_DIR            check a recorded run on Spark and write a report
    warren history compact RUN_DIR    the raw history segments into Parquet
    warren spark-archive              the JVM class archive for faster analyses

It sits on top of every package and nothing imports it: each package offers its
subcommands (an `add_parser` of its own) and this package only puts them under one
command. `python -m warren_cli ...` is the same command, which is how node
processes are started without a PATH lookup.
"""

from __future__ import annotations

from warren_cli.command import EX_USAGE, main

__all__ = ["EX_USAGE", "main"]
