"""Every figure in a README paragraph that cites a benchmark results file is in that file.

A paragraph cites `bench/results/<name>.json`; each number written in it (outside code spans,
and not part of a name such as E4 or S14) must equal, at the precision it is written with,
some number in the cited files, read as is or converted between seconds, milliseconds,
microseconds and hours, or MiB and GiB. A figure measured once and never recorded fails here.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# A results file, not the rows (.jsonl) a benchmark ran on.
CITATION = re.compile(r"bench/results/([\w.-]+\.json)(?!l)")
# A number not glued to a name (E4, S1-S14, rlft_e1, sha256) nor part of a date or version.
FIGURE = re.compile(r"(?<![\w.\-/])~?(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(?![\w\-]|\.\d)")
CI_LEVEL = re.compile(r"\b(?:90|95|99)% (?:bootstrap )?CIs?\b")
SCALES = (1.0, 1e3, 1e-3, 1e6, 1e-6, 3600.0, 1 / 3600, 1024.0, 1 / 1024)  # SI, per hour, MiB-GiB


def blocks_with_lines(text: str) -> list[tuple[int, str]]:
    """Blank-line separated blocks with the line each starts on."""
    blocks, line = [], 1
    for block in re.split(r"\n\s*\n", text):
        blocks.append((line, block))
        line += block.count("\n") + 2
    return blocks


def cited_paragraphs(text: str) -> Iterator[tuple[int, str, list[str]]]:
    """(first line, prose, cited files) of each paragraph naming a results file; a table that
    directly follows a paragraph ending in ':' belongs to it."""
    blocks = blocks_with_lines(text)
    for i, (start, block) in enumerate(blocks):
        cited = CITATION.findall(block)
        if not cited or block.lstrip().startswith("```"):
            continue
        if block.rstrip().endswith(":") and i + 1 < len(blocks) and blocks[i + 1][1].lstrip().startswith("|"):
            block += "\n" + blocks[i + 1][1]
        yield start, block, cited


def figures(prose: str) -> list[str]:
    prose = re.sub(r"`[^`]*`", " ", prose)
    prose = CI_LEVEL.sub(" ", prose)  # an interval's level is its name, not a measurement
    prose = re.sub(r"\|\s*:?-+:?\s*(?=\|)", "|", prose)
    return [m.group(1) for m in FIGURE.finditer(prose)]


def numbers(value: Any) -> Iterator[float]:
    if isinstance(value, bool):
        return
    if isinstance(value, int | float):
        if math.isfinite(value):
            yield float(value)
    elif isinstance(value, dict):
        for item in value.values():
            yield from numbers(item)
    elif isinstance(value, list):
        for item in value:
            yield from numbers(item)
    elif isinstance(value, str):
        for match in re.finditer(r"\d+(?:\.\d+)?", value):
            yield float(match.group())


def half_unit(written: str) -> float:
    """Half the place value of the last significant digit as written ("14,400" -> 50)."""
    digits = written.replace(",", "")
    if "." in digits:
        return 0.5 * 10 ** -len(digits.split(".")[1])
    trailing = len(digits) - len(digits.rstrip("0")) if digits.strip("0") else 0
    return 0.5 * 10**trailing


def recorded(written: str, values: list[float]) -> bool:
    target, tolerance = float(Decimal(written.replace(",", ""))), half_unit(written)
    return any(abs(v * scale - target) <= tolerance * (1 + 1e-9) for v in values for scale in SCALES)


def test_a_rows_file_is_not_read_as_a_results_file() -> None:
    assert CITATION.findall("rows `bench/results/a-rows.jsonl`, results `bench/results/a.json`") == ["a.json"]


def test_the_checker_reads_figures_as_written() -> None:
    assert figures("E4's rewards 14,400 rollouts/s (`make bench`, 2026-11-23) on S1-S14, ~420 us") == [
        "14,400",
        "420",
    ]
    assert figures("0.050 [0.040, 0.060], its 95% bootstrap CI over 95 rows") == ["0.050", "0.040", "0.060", "95"]
    assert recorded("14,400", [14354.0]) and not recorded("14,400", [14300.0])
    assert recorded("100", [0.1])  # ms written, seconds recorded
    assert not recorded("420", [477.2])


DOCUMENT_PARAGRAPHS = [
    pytest.param(doc, start, prose, cited, id=f"{doc.name}:{start}")
    for doc in DOCUMENTS
    for start, prose, cited in cited_paragraphs(doc.read_text(encoding="utf-8"))
]


@pytest.mark.parametrize(("document", "line", "prose", "cited"), DOCUMENT_PARAGRAPHS)
def test_readme_benchmark_figures_are_in_their_results_files(
    document: Path, line: int, prose: str, cited: list[str]
) -> None:
    values: list[float] = []
    for name in cited:
        path = REPO / "bench" / "results" / name
        assert path.exists(), f"{document.name}:{line}: cites {path.relative_to(REPO)}, which does not exist"
        values.extend(numbers(json.loads(path.read_text(encoding="utf-8"))))
    missing = [figure for figure in figures(prose) if not recorded(figure, values)]
    assert not missing, f"{document.name}:{line}: figures in no cited results file ({', '.join(cited)}): {missing}"


def test_some_paragraphs_cite_results() -> None:
    assert len(DOCUMENT_PARAGRAPHS) >= 4


THROUGHPUT = re.compile(r"\d[\d,.]*\s*(?:[A-Za-z-]+/(?:s|hour|min)\b|x faster)")


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda d: d.name)
def test_throughput_figures_cite_a_results_file(document: Path) -> None:
    """A speed quoted in prose that cites no results file has nothing to be checked against."""
    uncited = []
    for line, block in blocks_with_lines(document.read_text(encoding="utf-8")):
        if CITATION.search(block) or block.lstrip().startswith("```"):
            continue
        uncited += [f"{document.name}:{line}: {m.group()}" for m in THROUGHPUT.finditer(re.sub(r"`[^`]*`", " ", block))]
    assert not uncited, f"speeds with no bench/results file cited: {uncited}"
