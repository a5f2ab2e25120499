"""A stand-in for `warren node start --config FILE`: ready file, then sleep until SIGTERM.

It speaks the part of the node's contract the harness relies on (the config file,
`<data_dir>/ready`, SIGTERM for a clean stop) and nothing else, so the cluster and
nemesis tests need no broker. `"fake_fail": true` in the config makes it exit
before it is ready; `"fake_slow_exit": true` makes it take 0.3 s to exit after
SIGTERM, without a handler meanwhile.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path


def main() -> int:
    config = json.loads(Path(sys.argv[sys.argv.index("--config") + 1]).read_text())
    if config.get("fake_fail"):
        return 3
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    data = Path(config["data_dir"])
    data.mkdir(parents=True, exist_ok=True)
    (data / "ready.tmp").write_text(json.dumps({"node": config["name"], "pid": os.getpid(),
                                                "amqp_port": config["amqp_port"]}))
    (data / "ready.tmp").replace(data / "ready")
    while not stop:
        time.sleep(0.02)
    if config.get("fake_slow_exit"):
        # a process on its way out has its default handlers back (as Python's own
        # finalisation restores them): a second SIGTERM now would kill it
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        time.sleep(0.3)
    return 0


if __name__ == "__main__":
    sys.exit(main())
