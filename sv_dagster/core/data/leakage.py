"""Train/held-out leakage: no training row may duplicate or nearly duplicate a dev/test row.

Each row becomes its environment's canonical text (`Environment.canonical_text`: what makes
two examples "the same" there, e.g. E1 a flow without its source port and duration, E4 an
email's subject and body). A training row leaks when its normalised text (lowercased,
whitespace collapsed) hashes like a reference row's (exact), or when MinHash LSH over its
word tokens finds a reference row whose true token Jaccard is at least the environment's
threshold (near; LSH only proposes candidates, the Jaccard is then computed exactly).
Thresholds and the tolerated leak rate of a synthetic batch are in `configs/leakage.yaml`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sv_dagster.core.artifacts.paths import CONFIGS_DIR
from sv_dagster.core.artifacts.yamlfile import read_yaml_mapping
from sv_shared import textrefs
from sv_shared.errors import UserError

CONFIG_PATH = CONFIGS_DIR / "leakage.yaml"
REFERENCE_SPLITS = ("dev", "test", "corpus_test", "ood")
"""The dataset files no training row may resemble: everything scored or tuned on."""
COUNTERPART_SPLITS = ("test",)
"""Of an attack/defense counterpart's dataset: the rows its evals score."""
LSH_MARGIN = 0.2
"""How far below the Jaccard threshold the LSH index proposes candidates."""
SHOWN = 20
"""Offending rows listed in metadata (all of them go to leakage.json)."""

Row = dict[str, Any]
_SPACE = re.compile(r"\s+")


class LeakageConfigError(UserError, ValueError):
    """configs/leakage.yaml cannot be used; the message is one line naming the file."""


class Policy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    jaccard: float = Field(0.9, gt=0.0, le=1.0)
    """Token Jaccard at or above which a training row nearly duplicates a reference row."""
    max_leak_rate: float = Field(0.05, ge=0.0, le=1.0)
    """Share of a synthetic batch that may leak before its `no_test_leakage` check fails."""
    num_perm: int = Field(128, ge=16, le=512)


class _Override(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    jaccard: float | None = Field(None, gt=0.0, le=1.0)
    max_leak_rate: float | None = Field(None, ge=0.0, le=1.0)
    num_perm: int | None = Field(None, ge=16, le=512)


class LeakageConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    default: Policy = Policy()
    envs: dict[str, _Override] = {}

    def policy(self, env: str) -> Policy:
        override = self.envs.get(env)
        if override is None:
            return self.default
        return self.default.model_copy(update=override.model_dump(exclude_none=True))


def load_config(path: Path | None = None) -> LeakageConfig:
    path = path or CONFIG_PATH
    try:
        return LeakageConfig.model_validate(read_yaml_mapping(path, LeakageConfigError, "leakage config"))
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise LeakageConfigError(_SPACE.sub(" ", f"{path}: {problems}")) from exc
    except LeakageConfigError as exc:  # YAML errors span lines
        raise LeakageConfigError(_SPACE.sub(" ", str(exc))) from exc


def policy_for(env: str, path: Path | None = None) -> Policy:
    return load_config(path).policy(env)


# --- canonical text --------------------------------------------------------------------------


def default_canonical_text(row: Row) -> str:
    """The contract's default: the task's prompt text (`question`), else the user messages
    of its `prompt`/`messages` joined."""
    if isinstance(question := row.get("question"), str):
        return question
    messages = row.get("prompt") or row.get("messages") or []
    if isinstance(messages, list):
        return "\n".join(
            str(m.get("content") or "") for m in messages if isinstance(m, dict) and m.get("role") == "user"
        )
    return ""


def canonical_fn(env: Any) -> Callable[[Row], str]:
    """The environment's canonical text function (its `canonical_text`, else the default)."""
    return getattr(env, "canonical_text", None) or default_canonical_text


def normalize(text: str) -> str:
    return _SPACE.sub(" ", text.lower()).strip()


def text_hash(text: str) -> str:
    return hashlib.sha256(normalize(text).encode("utf-8", errors="surrogatepass")).hexdigest()


def tokens(text: str) -> set[str]:
    """Word tokens of the normalised text (what the Jaccard is over)."""
    return set(normalize(text).split())


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


# --- rows -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TextRow:
    """One row as the check sees it: where it is, and its canonical text."""

    file: str
    line: int
    """1-based line in `file`."""
    id: str | None
    text: str

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def read_text_rows(path: Path, canonical: Callable[[Row], str]) -> Iterator[TextRow]:
    """The rows of a JSONL file as TextRows; blank and unparsable lines are skipped (the
    dataset and synthetic checks report those)."""
    with Path(path).open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict):
                row = textrefs.hydrate_row(row, where=f"{path}:{number}")
                yield TextRow(str(path), number, None if row.get("id") is None else str(row["id"]), canonical(row))


def reference_files(dataset_files: Mapping[str, Path | str], splits: Iterable[str] = REFERENCE_SPLITS) -> list[Path]:
    """The held-out files of a dataset (by default dev, test, corpus_test, ood) that exist."""
    files = [Path(dataset_files[name]) for name in splits if name in dataset_files]
    return [path for path in files if path.is_file()]


def dataset_files(folder: Path) -> dict[str, Path]:
    """The files a `dataset/<env>` folder holds, by split name (from its metadata.json)."""
    report = json.loads((Path(folder) / "metadata.json").read_text(encoding="utf-8"))
    return {name: Path(folder) / file for name, file in (report.get("files") or {}).items()}


def counterparts_of(env: Any, envs: Iterable[Any]) -> list[Any]:
    """The attack/defense counterparts of `env`: the environment its `counterpart_env` names
    and every environment naming it (its held-out rows must not reach `env`'s training either)."""
    return [
        other
        for other in envs
        if other.env_id != env.env_id and (other.env_id == env.counterpart_env or other.counterpart_env == env.env_id)
    ]


# --- the check ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Leak:
    row: TextRow
    kind: str
    """"exact" (same normalised text) or "near" (token Jaccard >= the threshold)."""
    match: TextRow
    similarity: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "file": self.row.file,
            "line": self.row.line,
            "id": self.row.id,
            "kind": self.kind,
            "jaccard": round(self.similarity, 4),
            "matches": self.match.where,
            "matches_id": self.match.id,
        }


@dataclass
class LeakReport:
    n_train: int
    n_reference: int
    threshold: float
    leaks: list[Leak] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def n_exact(self) -> int:
        return sum(leak.kind == "exact" for leak in self.leaks)

    @property
    def n_near(self) -> int:
        return sum(leak.kind == "near" for leak in self.leaks)

    @property
    def leak_rate(self) -> float:
        return len(self.leaks) / self.n_train if self.n_train else 0.0

    def offending(self) -> set[tuple[str, int]]:
        """(file, line) of every leaking training row."""
        return {(leak.row.file, leak.row.line) for leak in self.leaks}

    def counts(self) -> dict[str, Any]:
        return {
            "n_train": self.n_train,
            "n_reference": self.n_reference,
            "n_leaked": len(self.leaks),
            "n_exact": self.n_exact,
            "n_near": self.n_near,
            "leak_rate": round(self.leak_rate, 4),
            "jaccard_threshold": self.threshold,
        }

    def as_dict(self, reference_files: Iterable[Path | str] = ()) -> dict[str, Any]:
        return {
            **self.counts(),
            "seconds": round(self.seconds, 3),
            "reference_files": [str(p) for p in reference_files],
            "leaks": [leak.as_dict() for leak in self.leaks],
        }

    def first(self, n: int = SHOWN) -> list[str]:
        return [
            f"{leak.row.where} ({leak.kind}, jaccard {leak.similarity:.2f}) ~ {leak.match.where}"
            for leak in self.leaks[:n]
        ]


def find_leaks(train: Iterable[TextRow], reference: Iterable[TextRow], policy: Policy) -> LeakReport:
    """Every training row that duplicates (normalised-text hash) or nearly duplicates
    (MinHash LSH candidates, confirmed by their exact token Jaccard) a reference row.
    A row with empty canonical text is never a match."""
    import time

    from datasketch import MinHash, MinHashLSH

    started = time.perf_counter()
    train_rows = list(train)
    by_hash: dict[str, TextRow] = {}
    ref_tokens: dict[str, set[str]] = {}
    n_reference = 0
    for row in reference:
        n_reference += 1
        if not row.text.strip():
            continue
        key = text_hash(row.text)
        if key not in by_hash:  # one entry per distinct text keeps the index small
            by_hash[key] = row
            ref_tokens[key] = tokens(row.text)
    report = LeakReport(len(train_rows), n_reference, policy.jaccard)
    if not by_hash:
        report.seconds = time.perf_counter() - started
        return report
    template = MinHash(num_perm=policy.num_perm, seed=1)
    hashed: dict[str, int] = {}

    def token_hash(word: str) -> int:  # tokens repeat across rows: hash each once
        value = hashed.get(word)
        if value is None:
            digest = hashlib.sha1(word.encode("utf-8", errors="surrogatepass")).digest()
            value = hashed[word] = int.from_bytes(digest[:4], "little")
        return value

    def minhash(words: set[str]) -> MinHash:
        m = MinHash(
            num_perm=policy.num_perm,
            seed=1,
            permutations=template.permutations,
            scheme=template.scheme,
            hashfunc=token_hash,
        )
        m.update_batch(list(words))
        return m

    # LSH recall near its own threshold is poor (~75% at J=0.94 for a 0.9 index), so the index
    # proposes generously below the threshold and the exact Jaccard decides.
    lsh = MinHashLSH(threshold=max(0.1, policy.jaccard - LSH_MARGIN), num_perm=policy.num_perm, weights=(0.2, 0.8))
    for key, words in ref_tokens.items():
        lsh.insert(key, minhash(words))
    for row in train_rows:
        if not row.text.strip():
            continue
        key = text_hash(row.text)
        if key in by_hash:
            report.leaks.append(Leak(row, "exact", by_hash[key], 1.0))
            continue
        words = tokens(row.text)
        best, best_key = 0.0, None
        for candidate in lsh.query(minhash(words)):
            similarity = jaccard(words, ref_tokens[candidate])
            if similarity > best:
                best, best_key = similarity, candidate
        if best_key is not None and best >= policy.jaccard:
            report.leaks.append(Leak(row, "near", by_hash[best_key], best))
    report.seconds = time.perf_counter() - started
    return report


def check_files(
    train_files: Iterable[Path | str],
    reference: Iterable[Path | str],
    canonical: Callable[[Row], str],
    policy: Policy,
    counterpart: Iterable[tuple[Path | str, Callable[[Row], str]]] = (),
) -> LeakReport:
    """`find_leaks` over JSONL files: the training files and the reference files in the
    environment's canonical text; `counterpart` files in their own environment's."""
    train = (row for path in train_files for row in read_text_rows(Path(path), canonical))
    return find_leaks(train, reference_rows(reference, canonical, counterpart), policy)


def reference_rows(
    reference: Iterable[Path | str],
    canonical: Callable[[Row], str],
    counterpart: Iterable[tuple[Path | str, Callable[[Row], str]]] = (),
) -> list[TextRow]:
    """The held-out rows as `check_files` compares them (counterpart files in their own
    environment's canonical text)."""
    refs = [row for path in reference for row in read_text_rows(Path(path), canonical)]
    return refs + [row for path, fn in counterpart for row in read_text_rows(Path(path), fn)]


def held_out_files(
    dataset_files: Mapping[str, Path | str], counterparts: Iterable[tuple[Any, Mapping[str, Path | str]]]
) -> tuple[list[Path], list[tuple[Path, Callable[[Row], str]]]]:
    """What an environment's training rows are compared with: its dataset's held-out files,
    and its counterparts' test files, each with its own environment's canonical text."""
    others = [
        (path, canonical_fn(other))
        for other, files in counterparts
        for path in reference_files(files, COUNTERPART_SPLITS)
    ]
    return reference_files(dataset_files), others


def env_reference_rows(
    env: Any, dataset_files: Mapping[str, Path | str], counterparts: Iterable[tuple[Any, Mapping[str, Path | str]]]
) -> list[TextRow]:
    """An environment's `held_out_files` as rows, each in its own environment's canonical text."""
    own, others = held_out_files(dataset_files, counterparts)
    return reference_rows(own, canonical_fn(env), others)


def held_out_screen(
    reference: list[TextRow], canonical: Callable[[Row], str], policy: Policy
) -> Callable[[Sequence[Row]], list[str | None]]:
    """For a generator: per candidate row, why it may not be kept (it duplicates or nearly
    duplicates a held-out row), or None."""

    def screen(rows: Sequence[Row]) -> list[str | None]:
        candidates = [
            TextRow("batch", number, None if row.get("id") is None else str(row["id"]), canonical(row))
            for number, row in enumerate(rows, 1)
        ]
        reasons: list[str | None] = [None] * len(rows)
        for leak in find_leaks(candidates, reference, policy).leaks:
            reasons[leak.row.line - 1] = (
                f"duplicates held-out row {leak.match.where} ({leak.kind}, token jaccard {leak.similarity:.2f})"
            )
        return reasons

    return screen


def batch_verdict(report: LeakReport, policy: Policy) -> tuple[bool, str]:
    """(passed, one-line description) of a synthetic batch's leak rate against the policy."""
    passed = report.leak_rate <= policy.max_leak_rate
    description = (
        f"{len(report.leaks)}/{report.n_train} rows ({report.leak_rate:.1%}) duplicate a dev/test row "
        f"({report.n_exact} exact, {report.n_near} at token Jaccard >= {policy.jaccard}); "
        f"allowed {policy.max_leak_rate:.1%}"
    )
    if report.n_reference == 0:
        description += "; no reference rows to compare against"
    return passed, description
