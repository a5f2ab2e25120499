"""What the benches measured is written up in docs pages, not in the scripts.

A bench script's docstring says what it measures, how to run it and what it prints;
the figures it produced, change by change, belong to a docs page the docstring names,
so the log can grow without burying the usage note, and README's list of pages names
every page a reader could look for.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = sorted(p for p in (ROOT / "bench").glob("*.py") if p.name != "__init__.py")
#: a usage note fits on a screen; a measurement log does not
MAX_DOCSTRING_LINES = 60
_DOC_PAGE = re.compile(r"docs/[\w.-]+\.md")


def docstring(path: Path) -> str:
    """The module docstring, read without importing the script (benches import pika,
    pyspark and start processes)."""
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=False) or ""


@pytest.mark.parametrize("script", BENCH, ids=lambda p: p.name)
def test_a_bench_docstring_is_a_usage_note_not_a_measurement_log(script: Path) -> None:
    lines = docstring(script).count("\n") + 1
    assert lines <= MAX_DOCSTRING_LINES, (
        f"{script.name}'s docstring has {lines} lines: move its figures to a docs page")


@pytest.mark.parametrize("script", BENCH, ids=lambda p: p.name)
def test_the_docs_pages_a_bench_names_exist(script: Path) -> None:
    for page in _DOC_PAGE.findall(docstring(script)):
        assert (ROOT / page).is_file(), f"{script.name} points at {page}, which is missing"


def test_the_end_to_end_bench_points_at_its_write_up() -> None:
    assert "docs/performance.md" in docstring(ROOT / "bench" / "e2e.py")


def test_readme_lists_every_docs_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    missing = [p.name for p in sorted((ROOT / "docs").glob("*.md"))
               if f"docs/{p.name}" not in readme]
    assert missing == []
