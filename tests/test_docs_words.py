"""The documents describe the code, not the history of its making, and point only inside the
repository (``docs/architecture.md``, "Style").

Comments, docstrings and documents name no work session, tracker issue or note kept elsewhere
(history is a commit hash, a figure a row of ``docs/measurements.md``); the architecture and
measurements documents exist; every relative link of the README, ``docs/*.md`` and
``docs/guides/*.md`` reaches a file of the repository, and a link into a document's section reaches one of its headings."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SEARCHED = ["python", "src", "docs", "tests", "README.md"]

# Each word has one letter in brackets, so that neither this file nor its compiled form
# matches what it looks for (a concatenation of literals would be folded back into one).
WORDS = "sessio[n] [0-9]+|issu[e] [0-9]+|closin[g] note"

LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def _git_checkout() -> bool:
    if shutil.which("git") is None:
        return False
    probe = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=ROOT,
                           capture_output=True, text=True)
    return probe.returncode == 0 and Path(probe.stdout.strip()).resolve() == ROOT


def test_no_session_issue_or_note_words() -> None:
    if not _git_checkout():
        pytest.skip("not a git checkout")
    found = subprocess.run(
        ["git", "grep", "--untracked", "-nIiE", WORDS, "--", *SEARCHED],
        cwd=ROOT, capture_output=True, text=True)
    assert found.returncode in (0, 1), found.stderr
    assert found.stdout == "", "words that name work sessions, issues or notes:\n" + found.stdout


def test_the_architecture_and_measurements_documents_exist() -> None:
    for name in ("architecture.md", "measurements.md"):
        assert (ROOT / "docs" / name).is_file(), name


def _documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
            *sorted((ROOT / "docs" / "guides").glob("*.md"))]


def _links(path: Path) -> list[tuple[int, str]]:
    """``(line, target)`` of every Markdown link outside fenced code blocks."""
    out: list[tuple[int, str]] = []
    fenced = False
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out += [(n, m.group(1)) for m in LINK.finditer(line)]
    return out


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    anchors: set[str] = set()
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            anchors.add(_slug(line.lstrip("#")))
        anchors.update(re.findall(r"<a (?:id|name)=\"([^\"]+)\"", line))
    return anchors


@pytest.mark.parametrize("doc", _documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc: Path) -> None:
    broken = []
    for n, target in _links(doc):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        dest = (doc.parent / file).resolve() if file else doc
        if not dest.exists():
            broken.append(f"{doc.relative_to(ROOT)}:{n}: {target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{doc.relative_to(ROOT)}:{n}: {target} (no such heading)")
    assert broken == []
