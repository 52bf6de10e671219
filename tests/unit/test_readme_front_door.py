"""README.md is a front door: short, `make demo` and `make test` before any other command, and
every relative link in it and in docs/*.md leads to a file (and heading) that exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCUMENTS = [README, *sorted((REPO / "docs").glob("*.md"))]
MAX_README_LINES = 300

FENCE = re.compile(r"^```.*?^```", re.M | re.S)
# A fenced block or an inline code span, in document order.
CODE = re.compile(r"^```[^\n]*\n(?P<block>.*?)^```|`(?P<span>[^`\n]+)`", re.M | re.S)
PROGRAMS = {"make", "python", "sv-dagster", "dagster", "pip", "uv", "source", "bash", "vf-eval", "pytest", "ruff"}
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def commands(text: str) -> list[str]:
    """The shell commands a document shows, in order (each line of a fenced block and each code
    span whose first word is a program), as the program and its first argument."""
    found = []
    for match in CODE.finditer(text):
        candidates = match.group("block").splitlines() if match.group("block") is not None else [match.group("span")]
        for candidate in candidates:
            words = candidate.split()
            if words[:1] == ["$"]:
                words = words[1:]
            if words and words[0] in PROGRAMS:
                found.append(" ".join(words[:2]))
    return found


def github_anchor(heading: str) -> str:
    """The id GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`", "", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(document: Path) -> set[str]:
    seen: dict[str, int] = {}
    result = set()
    for heading in HEADING.findall(FENCE.sub("", document.read_text(encoding="utf-8"))):
        anchor = github_anchor(heading)
        count = seen.get(anchor, 0)
        seen[anchor] = count + 1
        result.add(anchor if count == 0 else f"{anchor}-{count}")
    return result


def broken_links(document: Path) -> list[str]:
    """`FILE:LINE: target (why)` for each relative link whose file or heading is missing."""
    text = document.read_text(encoding="utf-8")
    prose = FENCE.sub(lambda m: "\n" * m.group().count("\n"), text)
    broken = []
    for match in LINK.finditer(prose):
        target = match.group(1) or match.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
            continue  # http:, https:, mailto: ...
        line = prose.count("\n", 0, match.start()) + 1
        path_part, _, anchor = target.partition("#")
        linked = (document.parent / path_part).resolve() if path_part else document
        if not linked.exists():
            broken.append(f"{document.relative_to(REPO)}:{line}: {target} (no such file)")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{document.relative_to(REPO)}:{line}: {target} (no such heading)")
    return broken


def test_the_readme_fits_a_front_door() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; at most {MAX_README_LINES}: move detail to docs/"


def test_the_readme_shows_make_demo_and_make_test_first() -> None:
    shown = commands(README.read_text(encoding="utf-8"))
    assert sorted(shown[:2]) == ["make demo", "make test"], f"README.md's first commands are {shown[:3]}"


def test_the_checker_finds_commands_and_anchors() -> None:
    text = "Run `make ui` or\n\n```\n$ sv-dagster eval e1 --n 3   # one\nmake test\n```\nnot `.venv`"
    assert commands(text) == ["make ui", "sv-dagster eval", "make test"]
    assert github_anchor("A user's dataset (`--dataset FILE`)") == "a-users-dataset---dataset-file"
    assert github_anchor("The default profile and E6's safety mix") == "the-default-profile-and-e6s-safety-mix"


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda d: d.name)
def test_relative_links_lead_somewhere(document: Path) -> None:
    broken = broken_links(document)
    assert not broken, f"broken links: {broken}"
