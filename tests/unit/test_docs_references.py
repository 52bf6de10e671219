"""Every module path and repository file path that README.md and docs/ cite in a code span
resolves: a module (or a name defined in it) that exists, a file or folder that exists. Code
moves; a doc that still cites where it was sends a reader nowhere.

A module path is a dotted name under one of the project's packages (`sv_dagster...`,
`sv_shared...`, `sv_env_*...`), or under `sv_dagster`'s own subpackages written short
(`core.evals.runner`); names inside a module are found by reading its source, nothing is
imported. A file path is one whose first part is an entry of the repository's top level, a
package folder (`sv_shared/...`, `sv_env_*/...`, found in its environment package) or
`core/...` (inside `sv_dagster`). Spans with placeholders (`<env>`, `*`, `...`, `{a,b}`, `$X`)
and asset keys (`eval/e1/heuristic`) are not paths to check.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SPAN = re.compile(r"`([^`\n]+)`")
PACKAGES = r"sv_dagster|sv_shared|sv_env_[a-z_]+"
SUBPACKAGES = tuple(p.name for p in (REPO / "sv_dagster").iterdir() if p.is_dir() and (p / "__init__.py").exists())
DOTTED = re.compile(rf"^(?:{PACKAGES}|{'|'.join(SUBPACKAGES)})(?:\.[A-Za-z_][A-Za-z0-9_]*)+$")
PATH = re.compile(r"^[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)+/?$")
PLACEHOLDERS = re.compile(r"[<>*{}$]|\.\.\.")
RUNTIME_ROOTS = {
    line.strip().strip("/") for line in (REPO / ".gitignore").read_text().splitlines() if line.strip().endswith("/")
}
"""What a run writes (outputs/, .cache/, ...): a doc may cite what is there after a run."""
ELSEWHERE = {
    "configs/training/e7.yaml": "the file the guide has its reader write for the example environment",
    "configs/resolved/eval.json": "inside vf-eval's output folder",
    "tests/functional/test_functional.py": "inside Bandit's pinned sdist",
    **{
        f"data/{group}": "inside the SpamAssassin npm tarball"
        for group in ("easy-ham-1", "easy-ham-2", "hard-ham-1", "spam-1", "spam-2")
    },
}
"""Paths cited with a top-level folder's name that live somewhere else, and where."""


@cache
def defined_names(source: Path) -> frozenset[str]:
    """Names a module defines or imports at any depth (classes, functions, assignments),
    `Class.method` included, read from its source."""
    tree = ast.parse(source.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
            if isinstance(node, ast.ClassDef):
                names.update(
                    f"{node.name}.{item.name}"
                    for item in node.body
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                )
        elif isinstance(node, ast.Assign):
            names.update(target.id for target in node.targets if isinstance(target, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return frozenset(names)


def module_path_resolves(dotted: str) -> bool:
    """The longest importable prefix is a module, and what follows it a name defined there."""
    if dotted.split(".")[0] in SUBPACKAGES:
        dotted = f"sv_dagster.{dotted}"
    if dotted in {group for group in entry_points().groups}:  # an entry point group, e.g. sv_dagster.environments
        return True
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            spec = importlib.util.find_spec(".".join(parts[:cut]))
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            continue
        rest = ".".join(parts[cut:])
        if not rest:
            return True
        if not spec.origin or not spec.origin.endswith(".py"):
            return False
        return rest in defined_names(Path(spec.origin))
    return False


def path_resolves(cited: str) -> bool | None:
    """True or False for a path the repository should hold, None for one it need not (an
    asset key, a path inside a downloaded archive, an output)."""
    cited = cited.removeprefix("./")
    first = cited.split("/", 1)[0]
    if first == ".." or first in RUNTIME_ROOTS or cited in ELSEWHERE:  # "..": outside the repository
        return None
    if (REPO / first).exists():
        return (REPO / cited).exists()
    if first == "core":
        return (REPO / "sv_dagster" / cited).exists()
    if re.fullmatch(PACKAGES, first):
        return any((package / cited).exists() for package in (REPO / "environments").iterdir())
    return None


def stale_references(text: str) -> list[tuple[int, str]]:
    """(line, cited text) of each code span in `text` that names a module or a repository
    path that does not resolve."""
    stale = []
    for number, line in enumerate(text.splitlines(), start=1):
        for match in SPAN.finditer(line):
            cited = match.group(1).strip()
            if PLACEHOLDERS.search(cited):
                continue
            if DOTTED.match(cited):
                if not module_path_resolves(cited):
                    stale.append((number, cited))
            elif PATH.match(cited) and path_resolves(cited.rstrip("/")) is False:
                stale.append((number, cited))
    return stale


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_cited_module_and_path_resolves(document: Path) -> None:
    stale = stale_references(document.read_text(encoding="utf-8"))
    assert not stale, f"{document.relative_to(REPO)} cites what is not there: " + "; ".join(
        f"line {line}: {cited}" for line, cited in stale
    )


def test_a_planted_stale_reference_is_caught() -> None:
    text = (
        "Secrets are redacted by `core.provenance.redact` before recording (`core.artifacts.redaction.redact`).\n"
        "The runner (`sv_dagster/core/evals/runner.py`, once `sv_dagster/core/runner.py`) and\n"
        "`sv_shared/safety/frozen.py`, `sv_shared/safety/gone.py`; `eval/e1/heuristic` is an asset key.\n"
    )
    assert stale_references(text) == [
        (1, "core.provenance.redact"),
        (2, "sv_dagster/core/runner.py"),
        (3, "sv_shared/safety/gone.py"),
    ]
