"""A learned safety judge beside the rules: logistic regression over word and character
n-grams, trained on the labelled set's development part only (never on the frozen part).

One model per role: "user" judges the prompt's text, "agent" the request and the reply
together (context + reply), as the rules and Llama Guard do. The settings below were chosen
by 5-fold cross-validation on the development part (Cohen's kappa 0.76 for C=10, min_df=2
against 0.72-0.75 for C in {1, 100}, min_df=1); the frozen part played no part in choosing
them. Training is deterministic (lbfgs, fixed seed) and takes a few seconds.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from sv_shared.safety import LabelledText, SafetyVerdict
from sv_shared.safety.base import check_role
from sv_shared.safety.redaction import marker_verdict

LEARNED_ID = "sv-learned-safety"
SEED = 0
SETTINGS: dict[str, Any] = {
    "word_ngrams": (1, 2),
    "char_ngrams": (2, 5),
    "min_df": 2,
    "sublinear_tf": True,
    "C": 10.0,
    "class_weight": "balanced",
    "max_iter": 2000,
}
THRESHOLD = 0.5


def document(text: str, context: str | None, role: str) -> str:
    """What the model reads: the prompt for "user", the request and the reply for "agent"."""
    return text if role == "user" else f"{context or ''}\n{text}"


def _pipeline():
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline, make_union

    features = make_union(
        TfidfVectorizer(
            ngram_range=SETTINGS["word_ngrams"], min_df=SETTINGS["min_df"], sublinear_tf=SETTINGS["sublinear_tf"]
        ),
        TfidfVectorizer(
            analyzer="char_wb",
            ngram_range=SETTINGS["char_ngrams"],
            min_df=SETTINGS["min_df"],
            sublinear_tf=SETTINGS["sublinear_tf"],
        ),
    )
    model = LogisticRegression(
        C=SETTINGS["C"], class_weight=SETTINGS["class_weight"], max_iter=SETTINGS["max_iter"], random_state=SEED
    )
    return make_pipeline(features, model)


@dataclass
class LearnedSafetyClassifier:
    """The trained judge; a `SafetyClassifier` (verdicts carry no category: it learns only
    safe/unsafe). A withheld marker is unsafe, as for every classifier."""

    models: dict[str, Any]
    training_ids: tuple[str, ...]
    id: str = LEARNED_ID
    version: str = field(default="")

    def __post_init__(self) -> None:
        if not self.version:  # the training rows and settings name the model
            digest = hashlib.sha256(repr((sorted(self.training_ids), sorted(SETTINGS.items()))).encode())
            self.version = digest.hexdigest()[:8]

    @property
    def ident(self) -> str:
        return f"{self.id}@{self.version}"

    def probabilities(self, items: Sequence[tuple[str, str | None, str]]) -> list[float]:
        """P(unsafe) for each (text, context, role)."""
        out = [0.0] * len(items)
        for role, model in self.models.items():
            index = [i for i, (_, _, r) in enumerate(items) if r == role]
            if not index:
                continue
            probs = model.predict_proba([document(*items[i]) for i in index])
            unsafe_col = list(model.classes_).index(True)
            for i, p in zip(index, probs[:, unsafe_col]):
                out[i] = float(p)
        return out

    def classify_many(self, items: Sequence[tuple[str, str | None, str]]) -> list[SafetyVerdict]:
        for _, _, role in items:
            check_role(role)
        probs = self.probabilities(items)
        verdicts = []
        for (text, _, _), p in zip(items, probs):
            marked = marker_verdict(text)
            verdicts.append(marked if marked is not None else SafetyVerdict(p >= THRESHOLD, (), self.ident))
        return verdicts

    def classify(self, text: str, *, context: str | None = None, role: str = "agent") -> SafetyVerdict:
        return self.classify_many([(text, context, role)])[0]

    async def aclassify(self, text: str, *, context: str | None = None, role: str = "agent") -> SafetyVerdict:
        return self.classify(text, context=context, role=role)


def train(examples: Sequence[LabelledText]) -> LearnedSafetyClassifier:
    """Fit one model per role on `examples` (callers pass the development part)."""
    models = {}
    for role in ("user", "agent"):
        rows = [e for e in examples if e.role == role]
        if len({e.unsafe for e in rows}) < 2:
            raise ValueError(f"role {role!r}: training needs both safe and unsafe rows, got {len(rows)} rows")
        models[role] = _pipeline().fit([document(e.text, e.context, e.role) for e in rows], [e.unsafe for e in rows])
    return LearnedSafetyClassifier(models=models, training_ids=tuple(e.id for e in examples))


def cache_dir() -> Path:
    """Where trained judges are kept between processes (SV_JUDGE_CACHE, else the user's cache)."""
    configured = os.environ.get("SV_JUDGE_CACHE")
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sv-dagster" / "learned-judge"


def cache_key(examples: Sequence[LabelledText]) -> str:
    """The training rows, the settings and the library version: what decides the model."""
    import sklearn

    rows = [(e.id, e.text, e.context, e.role, e.unsafe) for e in examples]
    return hashlib.sha256(repr((rows, sorted(SETTINGS.items()), SEED, sklearn.__version__)).encode()).hexdigest()[:16]


def cached_train(examples: Sequence[LabelledText], folder: Path | None = None) -> LearnedSafetyClassifier:
    """`train`, kept on disk: every eval step runs in a process of its own, and training
    takes seconds where loading takes milliseconds. A cache entry that cannot be read is
    trained again."""
    import pickle

    path = (folder or cache_dir()) / f"{cache_key(examples)}.pkl"
    try:
        judge = pickle.loads(path.read_bytes())
        if isinstance(judge, LearnedSafetyClassifier) and judge.training_ids == tuple(e.id for e in examples):
            return judge
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError, ValueError):
        pass
    judge = train(examples)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        partial.write_bytes(pickle.dumps(judge))
        os.replace(partial, path)  # concurrent processes never read half a file
    except OSError:
        pass  # a read-only cache only costs the next process its training time
    return judge


@lru_cache(maxsize=1)
def learned_judge() -> LearnedSafetyClassifier:
    """The learned judge trained on the bundled set's development part (once per machine)."""
    from sv_shared.safety import development_part

    return cached_train(development_part())
