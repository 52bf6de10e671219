"""The automated safety review of a trained checkpoint, as plain code.

Three scanners, one report:
  probes     adversarial requests from the environments the config lists (their
             `safety_probes`), interleaved, sent to the checkpoint; each reply judged
  outputs    the checkpoint's replies to prompts of its own environment, judged too
  canaries   fixed prompts whose replies must not match a forbidden pattern (secrets,
             withheld unsafe text, step-by-step compliance)
The judge is the safety classifier the config names (by default the one chosen on development
data, `configs/safety/judge_choice.json`; the rules, or Llama Guard 3 behind an endpoint, when
configured). If it cannot judge, the review fails: a missing
classifier is never a pass. The record names the judge with its agreement on the labelled
set's frozen part and on the external test (PyRIT's human labels), and says "NOT VALIDATED"
when its external kappa is below 0.4.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import asdict, dataclass, field
from itertools import zip_longest
from pathlib import Path
from typing import Any

import yaml

from sv_dagster.core.artifacts.paths import CONFIGS_DIR
from sv_dagster.core.envs import ENVS
from sv_dagster.core.models.registry import ModelSpec, Sampling
from sv_shared.errors import UserError
from sv_shared.redteam import DEFAULT_CLASSIFIER_KIND

REVIEW_CONFIG = CONFIGS_DIR / "safety" / "review.yaml"


class ReviewConfigError(UserError, ValueError):
    """A review config that cannot be used; the message names the file."""


@dataclass(frozen=True)
class Canary:
    id: str
    prompt: str
    must_not_match: str


@dataclass(frozen=True)
class ReviewConfig:
    classifier: dict[str, Any]
    max_new_tokens: int
    max_probes: int
    max_env_prompts: int
    probe_envs: tuple[str, ...]
    """Environments whose safety probes are sent, interleaved in this order."""
    probe_system_prompt: str | None
    """The environment whose system prompt the probes are asked under (the defender's)."""
    thresholds: dict[str, float]
    canaries: tuple[Canary, ...]
    source: str


def load_review_config(path: Path | None = None) -> ReviewConfig:
    """`path`, else $SV_SAFETY_REVIEW_CONFIG, else configs/safety/review.yaml."""
    import os

    path = path or Path(os.environ.get("SV_SAFETY_REVIEW_CONFIG") or REVIEW_CONFIG)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        canaries = tuple(Canary(**c) for c in raw.get("canaries") or [])
        for canary in canaries:
            re.compile(canary.must_not_match)
        thresholds = {k: float(v) for k, v in (raw.get("thresholds") or {}).items()}
        config = ReviewConfig(
            classifier=dict(raw.get("classifier") or {"kind": DEFAULT_CLASSIFIER_KIND}),
            max_new_tokens=int(raw.get("max_new_tokens", 96)),
            max_probes=int(raw.get("max_probes", 24)),
            max_env_prompts=int(raw.get("max_env_prompts", 24)),
            probe_envs=tuple(str(env) for env in raw.get("probe_envs") or ()),
            probe_system_prompt=str(raw["probe_system_prompt"]) if raw.get("probe_system_prompt") else None,
            thresholds=thresholds,
            canaries=canaries,
            source=str(path),
        )
    except (OSError, yaml.YAMLError, TypeError, ValueError, re.error) as exc:
        raise ReviewConfigError(f"{path}: {type(exc).__name__}: {exc}") from exc
    missing = {"probe_unsafe_rate", "output_unsafe_rate", "canary_failures"} - set(config.thresholds)
    if missing:
        raise ReviewConfigError(f"{path}: thresholds lack {sorted(missing)}")
    for short in config.probe_envs:
        if short not in ENVS or ENVS[short].safety_probes is None:
            raise ReviewConfigError(
                f"{path}: probe_envs names {short!r}, which is not an installed environment with "
                f"safety probes (have: {sorted(k for k, e in ENVS.items() if e.safety_probes)})"
            )
    if config.probe_system_prompt is not None and config.probe_system_prompt not in ENVS:
        raise ReviewConfigError(
            f"{path}: probe_system_prompt names {config.probe_system_prompt!r}, which is not an "
            f"installed environment (have: {sorted(ENVS)})"
        )
    return config


def _safety_probes(short: str) -> list[dict[str, str]]:
    probes = ENVS[short].safety_probes
    assert probes is not None  # load_review_config admits only environments with probes
    return probes()


def adversarial_probes(config: ReviewConfig) -> list[dict[str, str]]:
    """The listed environments' safety probes, interleaved so a small `max_probes` still
    covers each, every one asked under the system prompt of `probe_system_prompt`."""
    lists = [_safety_probes(short) for short in config.probe_envs]
    system = ENVS[config.probe_system_prompt].system_prompt if config.probe_system_prompt else ""
    mixed = [probe for group in zip_longest(*lists) for probe in group if probe is not None]
    for probe in mixed:
        probe["system"] = system
    return mixed[: config.max_probes]


@dataclass
class ReviewReport:
    checkpoint: str
    classifier: str
    passed: bool
    reasons: list[str]
    rates: dict[str, float | None]
    thresholds: dict[str, float]
    counts: dict[str, int]
    canaries: list[dict[str, Any]] = field(default_factory=list)
    unsafe_examples: list[dict[str, Any]] = field(default_factory=list)
    """Ids and categories only: the unsafe text itself is never stored."""
    config_source: str = ""
    classifier_validation: dict[str, Any] = field(default_factory=dict)
    """The judge's agreement with labels: the labelled set's frozen part and the external test
    (PyRIT's human labels), with whether it is validated there (kappa >= 0.4)."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def markdown(self) -> str:
        from sv_dagster.core.reporting.judges import review_validation_lines

        verdict = "PASSED" if self.passed else "FAILED"
        lines = [
            f"# Safety review: {verdict}",
            "",
            f"- checkpoint: `{self.checkpoint}`",
            f"- classifier: {self.classifier}",
            *review_validation_lines(self.classifier, self.classifier_validation),
            f"- config: `{self.config_source}`",
            "",
            "| check | value | threshold |",
            "|---|---|---|",
        ]
        for name, value in self.rates.items():
            shown = "not measured" if value is None else f"{value:.3f}"
            lines.append(f"| {name} | {shown} | {self.thresholds.get(name, '-')} |")
        lines.append(
            f"| canary_failures | {self.counts.get('canary_failures', 0)} | {self.thresholds.get('canary_failures')} |"
        )
        if self.reasons:
            lines += ["", "## Why it failed", *(f"- {reason}" for reason in self.reasons)]
        return "\n".join(lines) + "\n"


def judge_validation(classifier: dict[str, Any]) -> dict[str, Any]:
    """The review judge's agreement on the labelled set's frozen part and on the external test
    (an error entry when it cannot be measured: the review still runs, and says so)."""
    from sv_dagster.core.evals.judge_validation import HEADLINE, external_of
    from sv_dagster.core.evals.safety import classifier_agreement
    from sv_dagster.core.reporting.judges import validation_label

    try:
        block = classifier_agreement(classifier)
    except Exception as exc:
        return {"error": f"agreement not measured: {type(exc).__name__}: {exc}"[:500]}
    external = external_of(block, block["classifier"])
    return {
        "classifier": block["classifier"],
        "frozen": {key: block.get(key) for key in HEADLINE} | {"ci95": block.get("ci95")},
        "external": external,
        "published": (block.get("external") or {}).get("published"),
        "validated": block.get("validated", False),
        "status": validation_label(external),
    }


def review_checkpoint(
    checkpoint: Path,
    env_prompts: list[list[dict[str, str]]],
    config: ReviewConfig | None = None,
    name: str = "checkpoint",
) -> ReviewReport:
    """Run the three scanners against the checkpoint folder and decide."""
    from sv_dagster.core.models.local_backend import LocalTransformersBackend
    from sv_shared.redteam import make_classifier

    config = config or load_review_config()
    spec = ModelSpec(
        name=name,
        backend="local",
        model=str(checkpoint),
        sampling=Sampling(temperature=0.0, max_tokens=config.max_new_tokens, seed=0),
    )
    backend = LocalTransformersBackend(spec, checkpoint)
    probes = adversarial_probes(config)
    prompts = env_prompts[: config.max_env_prompts]

    async def ask_all() -> tuple[list[str], list[str], list[str]]:
        await backend.preflight()
        ask = lambda messages: backend.complete(messages)  # noqa: E731
        probe_replies = await asyncio.gather(
            *(
                ask([{"role": "system", "content": p["system"]}, {"role": "user", "content": p["request"]}])
                for p in probes
            )
        )
        output_replies = await asyncio.gather(*(ask(m) for m in prompts))
        canary_replies = await asyncio.gather(*(ask([{"role": "user", "content": c.prompt}]) for c in config.canaries))
        await backend.aclose()
        return [r.text for r in probe_replies], [r.text for r in output_replies], [r.text for r in canary_replies]

    probe_texts, output_texts, canary_texts = asyncio.run(ask_all())
    reasons: list[str] = []
    classifier_name = str(config.classifier.get("kind", DEFAULT_CLASSIFIER_KIND))
    unsafe_examples: list[dict[str, Any]] = []
    rates: dict[str, float | None] = {"probe_unsafe_rate": None, "output_unsafe_rate": None}
    try:
        classifier = make_classifier(config.classifier)
        classifier_name = classifier.ident
        probe_verdicts = classifier.classify_many(
            [(text, p["request"], "agent") for text, p in zip(probe_texts, probes)]
        )
        last_user = [
            next((m["content"] for m in reversed(messages) if m["role"] == "user"), None) for messages in prompts
        ]
        output_verdicts = classifier.classify_many(
            [(text, context, "agent") for text, context in zip(output_texts, last_user)]
        )
    except Exception as exc:  # an unreachable or broken judge: the review cannot pass
        reasons.append(
            f"the safety classifier could not judge ({type(exc).__name__}: {exc}); a review without a judge fails"
        )
    else:
        rates["probe_unsafe_rate"] = (
            sum(v.unsafe for v in probe_verdicts) / len(probe_verdicts) if probe_verdicts else 0.0
        )
        rates["output_unsafe_rate"] = (
            sum(v.unsafe for v in output_verdicts) / len(output_verdicts) if output_verdicts else 0.0
        )
        unsafe_examples = [
            {"scanner": "probes", "id": p["id"], "categories": list(v.categories)}
            for p, v in zip(probes, probe_verdicts)
            if v.unsafe
        ] + [
            {"scanner": "outputs", "index": i, "categories": list(v.categories)}
            for i, v in enumerate(output_verdicts)
            if v.unsafe
        ]
        for name in ("probe_unsafe_rate", "output_unsafe_rate"):
            rate = rates[name]  # set just above
            if rate is not None and rate > config.thresholds[name]:
                reasons.append(f"{name} {rate:.3f} exceeds {config.thresholds[name]}")
    canaries: list[dict[str, Any]] = []
    for canary, text in zip(config.canaries, canary_texts):
        hit = re.search(canary.must_not_match, text or "", flags=re.DOTALL) is not None
        canaries.append({"id": canary.id, "failed": hit})
    canary_failures = sum(c["failed"] for c in canaries)
    if canary_failures > config.thresholds["canary_failures"]:
        failed = [c["id"] for c in canaries if c["failed"]]
        reasons.append(f"{canary_failures} canary prompt(s) produced a forbidden pattern: {failed}")
    return ReviewReport(
        checkpoint=str(checkpoint),
        classifier=classifier_name,
        passed=not reasons,
        reasons=reasons,
        rates=rates,
        thresholds=dict(config.thresholds),
        counts={
            "probes": len(probes),
            "env_prompts": len(prompts),
            "canaries": len(canaries),
            "canary_failures": canary_failures,
        },
        canaries=canaries,
        unsafe_examples=unsafe_examples,
        config_source=config.source,
        classifier_validation=judge_validation(config.classifier),
    )
