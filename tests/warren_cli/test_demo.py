"""The README's main job, end to end: three node processes, a SIGKILL, a restart."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_demo_survives_sigkill_and_restart() -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-m", "warren_cli", "demo", "--net-ticktime", "2"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[-1] == "demo: ok"
    assert sum("noconnection" in line for line in lines) == 2  # both survivors saw it
    assert sum("nodedown" in line for line in lines) == 2
    assert any(line.strip().startswith("old pid") and line.endswith("noproc") for line in lines)
    assert "Traceback" not in out.stderr
