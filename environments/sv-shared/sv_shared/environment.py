"""The environment contract: what an environment package tells the pipeline about itself.

Each environment package exports one `Environment` under the entry point group
`sv_dagster.environments` (in its pyproject: `[project.entry-points."sv_dagster.environments"]`
`e1 = "sv_env_network_logs.plugin:ENVIRONMENT"`). The pipeline discovers the installed ones
and loops over them; it names none. Everything here is plain data and plain functions, so
the contract costs nothing to import and knows nothing of Dagster.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # each imports its own dependencies; a plugin that offers none needs none of them
    from sv_shared.corpora import CorpusSpec
    from sv_shared.sft import SftSpec
    from sv_shared.synthetic import SyntheticSpec

ENTRY_POINT_GROUP = "sv_dagster.environments"

Row = dict[str, Any]
RateFn = Callable[[Row], float | None]


class LazyFunction:
    """A function named by `"package.module:function"`, imported on its first call.

    Taskset modules import verifiers (about 3 s): an `Environment` names functions there
    this way, so discovering the environments (every CLI start, every definitions load)
    stays fast. Attributes (e.g. `takes_messages`) are those of the function."""

    def __init__(self, target: str) -> None:
        module, _, name = target.partition(":")
        if not module or not name:
            raise ValueError(f"{target!r} is not 'package.module:function'")
        self.target = target
        self._function: Callable[..., Any] | None = None

    def resolve(self) -> Callable[..., Any]:
        if self._function is None:
            module, _, name = self.target.partition(":")
            self._function = getattr(importlib.import_module(module), name)
        return self._function

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.resolve()(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.resolve(), name)

    def __repr__(self) -> str:
        return f"LazyFunction({self.target!r})"


@dataclass(frozen=True)
class ReferencePolicies:
    """The trivial policies a labelling environment's tables show beside its models: always
    abstain, always the positive label, always the majority label. Each reply is written by
    `reply` in the environment's own answer format, so the scorer that scores the models
    scores them, and a reader sees at once when answering does worse than not trying."""

    labels: tuple[str, ...]
    """The gold answers a row can have (the positive one among them)."""
    positive: str
    """The positive answer (the class a miss costs most on, or a refusal)."""
    reply: Callable[..., str]
    """`reply(answer, confidence=c, request=r) -> str`: the constant policy's reply to one
    request, `r` the user prompt (or the conversation so far, when `takes_messages`); `c`
    is the answer's share of the labels it is drawn from, where the format states one."""
    abstain: str | None = None
    """The answer that abstains; None where the environment has none (no always-abstain row)."""
    takes_messages: bool = False
    """`request` is the conversation (a list of messages), not the last user prompt."""
    compare: str = "cost_weighted_accuracy"
    """The summary key, higher is better, on which a model is read against the best
    reference policy (`vs best ref` in the tables)."""


@dataclass(frozen=True)
class Environment:
    """One environment, as the pipeline sees it."""

    short: str
    """Asset key part and job suffix (`e1`: `dataset/e1`, `eval_e1`); unique among the installed."""
    env_id: str
    """The verifiers taskset id, which is also the distribution name (`sv-env-network-logs`)."""
    module: str
    """The import name of the taskset package (`sv_env_network_logs`)."""
    description: str
    heuristic: Callable[..., str]
    """The rule baseline: `reply(prompt) -> str`, or `reply(messages) -> str` when the
    function has `takes_messages` (the dialogue baselines)."""
    columns: tuple[tuple[str, str], ...]
    """(title, summary key) of the headline metrics: the demo table and asset metadata."""
    parse: Callable[[str], Any] | None = None
    """Completion -> parsed answer (None: the environment has no answer schema)."""
    oracle: Callable[[str], str] | None = None
    """The reply built from what the verifier knows (the tools' findings, the reference
    fix): an upper bound to read model scores against."""
    positive_label: str | None = None
    """Labelling environments: the positive class. Their summaries are classification
    metrics (accuracy, ECE, cost-weighted accuracy, F1, abstention); the others' are
    mean reward plus `rates`."""
    rates: Mapping[str, RateFn] = field(default_factory=dict)
    """Per-example statistics of a results row (None: not applicable to that row), each
    summarised as a mean with a 95% bootstrap CI."""
    summary_extra: Callable[[list[Row], dict[str, Any]], dict[str, Any]] | None = None
    """Further summary keys computed from the scored rows and the summary so far."""
    sample_note: str = "project-written samples"
    """What the bundled sample data is, for tables that show SAMPLE rows."""
    counterpart_env: str | None = None
    """Dialogue environments with a model on the other side (E5's target): the environment
    whose rule baseline plays that side when the registry's heuristic is chosen."""
    withholds_unsafe: bool = False
    """Its tasks store text their safety judge marks unsafe only as hashes: such an
    environment's model responses are never put in the response cache."""
    tool_versions: Callable[[], dict[str, Any]] | None = None
    """The environment's tools (available, version, rule-set hash), for provenance."""
    tool_cache_stats: Callable[[], dict[str, Any] | None] | None = None
    """Hits and misses of the environment's tool-result cache in this process so far (None:
    no cache)."""
    tool_reward: str | None = None
    """The reward component that scores the model's use of its tools (e.g. claims grounded in
    what the tools returned): triage files an example scoring under 0.5 on it as tool misuse."""
    system_prompt: str = ""
    """The system prompt its tasks give the model under evaluation."""
    safety_probes: Callable[[], list[dict[str, str]]] | None = None
    """Sanitized adversarial requests (`id`, `source`, `request`) the automated safety
    review of any trained checkpoint sends, if the review config lists this environment."""
    load_reward_settings: Callable[[Any], Any] | None = None
    """Reward config path (None: the package's own rewards.toml) -> the reward settings
    the tasks score with (checked: a bad file raises before any model call)."""
    write_bundled_dataset: Callable[[Any], Any] | None = None
    """Writes the package's bundled SAMPLE rows, in its dataset shape, to a path: the
    `bundled` test source of its dataset, and a tournament's defense probes."""
    synthetic: SyntheticSpec | None = None
    """How the environment makes its daily synthetic batch."""
    corpora: CorpusSpec | None = None
    """How third-party corpora become its rows."""
    sft: SftSpec | None = None
    """How its tasks become SFT targets, with difficulty and variants."""
    canonical_text: Callable[[Row], str] | None = None
    """A dataset row -> the text that makes two examples "the same" here (E1: a flow without
    its source port and duration; E4: subject and body), for the train vs dev/test leakage
    check. None: the row's `question`, else the user messages of its `prompt` joined."""
    user_row: Callable[[Row], Row] | None = None
    """One row of a user's JSONL file (`sv-dagster eval --dataset FILE`), in the environment's
    own dataset shape or the common `{question, answer, meta|info}` -> the row its taskset
    reads; a ValueError whose text is the reason for a row it cannot use. Checked with the
    taskset's own parsers, so a kept row never fails to load later. None: no user files."""
    user_shapes: str = ""
    """The row shapes `user_row` accepts, in a few words, for the message on a bad row."""
    reference: ReferencePolicies | None = None
    """Labelling environments (and E6's refusals): the trivial policies scored beside every
    model, in each eval's summary and table. None: no reference rows."""


def reward(row: Row, name: str) -> float | None:
    """One reward component of a results row (None: not scored)."""
    return (row.get("rewards") or {}).get(name)


def detail(row: Row, *path: str) -> Any:
    """A value under the row's scoring details (None where the path is absent)."""
    value: Any = row.get("details")
    for part in path:
        value = value.get(part) if isinstance(value, dict) else None
    return value


def all_one(row: Row, names: tuple[str, ...]) -> float | None:
    """1.0 when every named reward component is 1.0, 0.0 when one is not, None if one is missing."""
    values = [reward(row, name) for name in names]
    return None if any(v is None for v in values) else float(all(v == 1.0 for v in values))


def share(row: Row, part: str, whole: str) -> float | None:
    """details[part] / details[whole] (None when the whole is 0 or absent)."""
    denominator = detail(row, whole)
    return None if not denominator else (detail(row, part) or 0) / denominator


def flag(row: Row, *path: str) -> float | None:
    """1.0 / 0.0 for a truthy / falsy detail, None for a row with no details (not scored)."""
    return None if not row.get("details") else float(bool(detail(row, *path)))


def common_row(row: Row, allowed: tuple[str, ...], int_answers: Mapping[int, str] | None = None) -> Row:
    """A row in the common research shape `{id?, question, answer, meta|info}` as the shared
    JSONL reader (`sv_shared.jsonl.read_examples`) takes it: the answer in its canonical
    spelling, `meta` read as `info`. A ValueError names what is wrong."""
    from sv_shared.jsonl import canonical_answer  # the reader's own rule

    question = row.get("question")
    if not isinstance(question, str) or not question.strip():
        raise ValueError("missing or empty 'question'")
    if row.get("answer") is None:
        raise ValueError("missing 'answer'")
    answer = canonical_answer(row["answer"], allowed, int_answers)
    if answer is None:
        raise ValueError(f"answer {row['answer']!r} is not one of {list(allowed)}")
    info = row.get("info", row.get("meta")) or {}
    if not isinstance(info, dict):
        raise ValueError("'info'/'meta' must be an object")
    out: Row = {"question": question, "answer": answer, "info": dict(info)}
    if row.get("id") is not None:
        out["id"] = str(row["id"])
    return out
