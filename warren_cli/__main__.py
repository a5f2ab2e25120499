"""`python -m warren_cli ...`: the `warren` command with this interpreter."""

from __future__ import annotations

import sys

from warren_cli.command import main

if __name__ == "__main__":
    sys.exit(main())
