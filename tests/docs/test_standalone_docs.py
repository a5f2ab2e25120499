"""The repository reads on its own: no code, doc or test points at a document it lacks.

A comment such as "see the spec, section 5.3" sends a newcomer to a text that is not in
the repository. Behaviour is described in `docs/*.md` instead, or by naming the upstream
module or function it models (`rabbit_fifo:apply/3`, Ra's `ra_server`), so every
reference here must be followable from a checkout. Section signs are allowed only for
the Raft paper and thesis, which are public.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: files whose text is checked (documentation, code, configuration)
SUFFIXES = {".py", ".md", ".toml", ".cfg", ".ini", ".txt", ".yml", ".yaml", ".sh"}
#: directories that are not part of the project's own text
SKIPPED_DIRS = {".git", ".venv", "venv", "node_modules", "__pycache__", "build", "dist"}

_SPEC = "spec"
_SECTION = "\u00a7"
#: ways of pointing at an unshipped specification or design document
FORBIDDEN = re.compile(
    "|".join([
        rf"\b{_SPEC}:? [a-z]*\.?md ?{_SECTION}",   # a named spec file and a section
        rf"\b{_SPEC} {_SECTION}",                  # a spec section
        rf"\b{_SPEC}/[a-z]+\.md",                   # a spec file path
        rf"\b{_SPEC} \d+(?:\.\d+)*\b",              # a numbered spec section
        r"\bDESIGN\.md\b",                          # the design notes are not shipped
        rf"(?<!Raft )(?<!thesis )(?<!paper ){_SECTION} ?\d",  # a bare section number
    ]),
)


def project_files(root: Path) -> list[Path]:
    """Every checked text file under `root`, hidden and virtualenv directories left out."""
    found = []
    for path in root.rglob("*"):
        rel = path.relative_to(root)
        if any(part in SKIPPED_DIRS or part.startswith(".") for part in rel.parts[:-1]):
            continue
        if path.is_file() and path.suffix in SUFFIXES:
            found.append(path)
    return found


def dangling_references(root: Path) -> list[str]:
    """``path:line: text`` for each line that refers to a document the repository lacks."""
    hits = []
    for path in project_files(root):
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            if FORBIDDEN.search(line):
                hits.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    return hits


def test_no_file_refers_to_an_unshipped_spec() -> None:
    assert dangling_references(ROOT) == []


def test_the_check_catches_each_form(tmp_path: Path) -> None:
    sign = _SECTION
    lines = [
        f"# as the {_SPEC} {sign}5.3 says",
        f'"""Tree ({_SPEC} channel.md {sign}1.2)."""',
        f"(see {_SPEC}/actors.md {sign}10)",
        f"(spec: actors.md {sign}10)",
        f"checked at those indexes ({_SPEC} 4.3)",
        f"the {'DESIGN'}.md tree",
        f"# --- publishing ({sign}17.2) ---",
    ]
    (tmp_path / "mod.py").write_text("\n".join(lines) + "\n")
    assert len(dangling_references(tmp_path)) == len(lines)


def test_the_raft_paper_and_plain_words_are_allowed(tmp_path: Path) -> None:
    (tmp_path / "ok.py").write_text(
        f'"""Raft {_SECTION}5.4.1 and thesis {_SECTION}9.6; a child {_SPEC} (dict)."""\n'
        f"supervisor.start_child(sup, {_SPEC})\n")
    assert dangling_references(tmp_path) == []
