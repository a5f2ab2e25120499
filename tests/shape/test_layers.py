"""The packages depend on each other only as docs/architecture.md's layer table says,
and no modules import each other in a circle, deferred imports included.

The table in the docs is the only statement of the layers: this test reads it, so
changing a layer means changing the docs. An import inside a function counts like any
other (that is where cycles hide), and so does one made only for type annotations.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from tests.shape.imports import find_cycles, module_imports, read_layer_table, upward_imports

ROOT = Path(__file__).resolve().parents[2]
TABLE = read_layer_table((ROOT / "docs" / "architecture.md").read_text())


def _our_packages() -> set[str]:
    """The packages warren installs (pyproject's package list, without the globs)."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return {p.rstrip("*") for p in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]}


IMPORTS = module_imports(ROOT, sorted(_our_packages()))


def test_every_installed_package_has_a_row_and_every_row_a_package() -> None:
    assert set(TABLE) == _our_packages()


def test_the_table_names_only_its_own_packages() -> None:
    named = set().union(*TABLE.values())
    assert named <= set(TABLE)


def test_the_layer_table_itself_has_no_cycle() -> None:
    edges = [(package, dep) for package, deps in TABLE.items() for dep in deps]
    assert find_cycles(edges) == []


def test_imports_only_go_down_the_layer_table() -> None:
    wrong = [str(imp) for imp in upward_imports(IMPORTS, TABLE)]
    assert wrong == []


def test_no_modules_import_each_other_in_a_circle() -> None:
    """Imports under ``if TYPE_CHECKING:`` never run, so they close no circle."""
    edges = [(imp.source, imp.target) for imp in IMPORTS if not imp.type_only]
    cycles = find_cycles(edges)
    shown = [" -> ".join(cycle) + ": " + "; ".join(
        str(imp) for imp in IMPORTS
        if imp.source in cycle and imp.target in cycle and not imp.type_only)
        for cycle in cycles]
    assert shown == []


CHANNEL_HEADING = "## Layers inside `channel`"
CHANNEL_TABLE = read_layer_table((ROOT / "docs" / "architecture.md").read_text(), CHANNEL_HEADING)
#: what sits in `channel/` itself, below every row: the package and its error value
CHANNEL_ROOT = {"channel", "channel.errors"}


def _channel_row(module: str) -> str:
    """The row a module of `channel` belongs to: the longest one naming its package;
    ``channel`` for the package's own modules."""
    rows = [row for row in CHANNEL_TABLE if module == row or module.startswith(row + ".")]
    return max(rows, key=len, default="channel")


def test_channel_is_split_into_the_sub_packages_its_table_names() -> None:
    """Every module of `channel` lives in one of the table's sub-packages, except the
    package itself and its error value; every sub-package has a row."""
    ours = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            for p in (ROOT / "channel").rglob("*.py")}
    loose = sorted(m for m in ours if _channel_row(m) == "channel" and m not in CHANNEL_ROOT)
    assert loose == []
    packages = {".".join(p.relative_to(ROOT).parent.parts)
                for p in (ROOT / "channel").rglob("__init__.py")} - {"channel"}
    assert packages == set(CHANNEL_TABLE)


def test_the_channel_table_has_no_cycle() -> None:
    edges = [(row, dep) for row, deps in CHANNEL_TABLE.items() for dep in deps]
    assert find_cycles(edges) == []


def test_channel_imports_only_go_down_its_table() -> None:
    wrong = [str(imp) for imp in IMPORTS
             if imp.source.startswith("channel.") and imp.target.startswith("channel.")
             and (source := _channel_row(imp.source)) != (target := _channel_row(imp.target))
             and target not in CHANNEL_TABLE.get(source, set())]
    assert wrong == []
