"""The environments the pipeline knows, and how to load and summarise each one.

An environment is a verifiers v1 taskset package; this table only says how the pipeline
calls it (taskset id, answer parser, summary metrics). Later environments add a row.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sv_dagster.core.summary import classification_summary, rate_summary

if TYPE_CHECKING:
    import verifiers.v1 as vf


@dataclass(frozen=True)
class EnvSpec:
    short: str
    """e1..e6: asset keys and job names."""
    env_id: str
    """verifiers taskset id (the installable package name)."""
    module: str
    parse: str
    """`function` in `module` turning a completion into a parsed answer."""
    summarize: Callable[[list[dict[str, Any]], Any], dict[str, Any]]
    positive_label: str | None = None
    description: str = ""
    columns: tuple[tuple[str, str], ...] = ()
    """(title, summary key) of the headline metrics: the demo table and asset metadata."""
    sample_note: str = "project-written samples"

    @property
    def package(self) -> Any:
        return importlib.import_module(self.module)

    def parser(self) -> Callable[[str], Any]:
        return getattr(self.package, self.parse)

    def load_tasks(
        self,
        dataset_path: Path | None,
        reward_config: Path | None,
        limit: int | None = None,
        seed: int | None = None,
    ) -> list[vf.Task]:
        return list(self.iter_tasks(dataset_path, reward_config, limit, seed))

    def iter_tasks(
        self,
        dataset_path: Path | None,
        reward_config: Path | None,
        limit: int | None = None,
        seed: int | None = None,
    ) -> Iterator[vf.Task]:
        """Tasks through verifiers' own loader, as `vf-eval` would build them, one at a
        time (a 100k-example eval never holds 100k tasks). With a `limit`, the subset is
        `limit` tasks after a shuffle under `seed` (vf-eval's `-s --select.seed SEED -n
        LIMIT` picks the same ones), so every model compared with one seed sees the same
        examples. The dataset file is read and checked on the first `next()`."""
        from verifiers.v1.utils.loaders import load_taskset, taskset_config_type

        config_type = taskset_config_type(self.env_id)
        config = config_type(
            id=self.env_id,
            dataset_path=dataset_path,
            task={"reward_config": reward_config},
        )
        taskset = load_taskset(config)
        if limit:
            taskset = (taskset.shuffle(seed) if seed is not None else taskset).take(limit)
        return iter(taskset)

    def reward_settings(self, reward_config: Path | None) -> Any:
        return self.package.load_reward_settings(reward_config)

    def tool_versions(self) -> dict[str, Any] | None:
        """The environment's tools (available, version, rule-set hash), for provenance."""
        fn = getattr(self.package, "tool_versions", None)
        return fn() if fn is not None else None

    def tool_cache_stats(self) -> dict[str, Any] | None:
        """Hits and misses of the environment's tool-result cache in this process so far."""
        fn = getattr(self.package, "tool_cache_stats", None)
        return fn() if fn is not None else None


def _reward(row: dict[str, Any], name: str) -> float | None:
    return (row.get("rewards") or {}).get(name)


def _all_one(row: dict[str, Any], names: tuple[str, ...]) -> float | None:
    values = [_reward(row, name) for name in names]
    return None if any(v is None for v in values) else float(all(v == 1.0 for v in values))


E3_RATES = {
    # Issue 7's E3 statistics: tests pass (functional and security), fix rate (tests pass and
    # the scanners' original finding is gone with no new one), and how often a patch applies.
    "test_pass_rate": lambda row: _all_one(row, ("functional", "security")),
    "fix_rate": lambda row: _all_one(row, ("functional", "security", "finding_fixed", "no_new_findings")),
    "patch_apply_rate": lambda row: (
        None if not row.get("details") else float(bool((row["details"].get("patch") or {}).get("applied")))
    ),
}


def _detail(row: dict[str, Any], *path: str) -> Any:
    value: Any = row.get("details")
    for part in path:
        value = value.get(part) if isinstance(value, dict) else None
    return value


E2_RATES = {
    # Issue 7's E2 statistics: finding F1 (severity-weighted, per file), patch success (the
    # patch applied and removed findings without adding any), clean pass (clean files only:
    # answered with no violations).
    "finding_f1": lambda row: _detail(row, "detection", "f1"),
    "finding_precision": lambda row: _detail(row, "detection", "precision"),
    "finding_recall": lambda row: _detail(row, "detection", "recall"),
    "patch_success": lambda row: None if row.get("details") is None else float(bool(_detail(row, "patch_success"))),
    "clean_pass": lambda row: (
        float(bool(_detail(row, "answered_clean"))) if _detail(row, "clean") else None
    ),
    "grounding": lambda row: _reward(row, "grounding"),
}


def _evidence(row: dict[str, Any], key: str) -> Any:
    return ((row.get("details") or {}).get("evidence") or {}).get(key)


def phishing_summary(rows: list[dict[str, Any]], settings: Any) -> dict[str, Any]:
    """E1's label metrics plus issue 7's E4 evidence precision: verified items over all
    evidence items given, pooled over the scored examples that gave any."""
    summary = classification_summary(rows, settings)
    scored = [row for row in rows if row.get("error") is None]
    verified = sum(_evidence(row, "verified") or 0 for row in scored)
    given = verified + sum(_evidence(row, "invented") or 0 for row in scored)
    summary["evidence_precision"] = verified / given if given else None
    summary["mean_evidence_reward"] = summary["mean_rewards"].get("evidence")
    return summary


ENVS: dict[str, EnvSpec] = {
    "e1": EnvSpec(
        short="e1",
        env_id="sv-env-network-logs",
        module="sv_env_network_logs",
        parse="parse_completion",
        summarize=classification_summary,
        positive_label="Malicious",
        description="Network-flow anomaly detection (calibrated labels, abstention, asymmetric cost)",
        columns=(
            ("accuracy", "accuracy"),
            ("ECE", "ece"),
            ("cost-wtd acc", "cost_weighted_accuracy"),
            ("F1", "f1"),
            ("abstain", "abstain_rate"),
            ("errors", "n_errors"),
        ),
        sample_note="synthetic flows in the IoT-23 schema",
    ),
    "e2": EnvSpec(
        short="e2",
        env_id="sv-env-config-verification",
        module="sv_env_config_verification",
        parse="parse_completion",
        summarize=lambda rows, settings: rate_summary(rows, E2_RATES),
        description="Kubernetes/Terraform config verification (OPA/Rego, Semgrep, Checkov, KubeLinter)",
        columns=(
            ("mean reward", "mean_reward"),
            ("finding F1", "finding_f1"),
            ("patch success", "patch_success"),
            ("clean pass", "clean_pass"),
            ("grounding", "grounding"),
            ("errors", "n_errors"),
        ),
        sample_note="hand-written manifests and Terraform files",
    ),
    "e3": EnvSpec(
        short="e3",
        env_id="sv-env-code-vulnerability",
        module="sv_env_code_vulnerability",
        parse="parse_completion",
        summarize=lambda rows, settings: rate_summary(rows, E3_RATES),
        description="Code-vulnerability repair (unified diff; sandboxed tests; Bandit/Semgrep re-scan)",
        columns=(
            ("mean reward", "mean_reward"),
            ("tests pass", "test_pass_rate"),
            ("fixed", "fix_rate"),
            ("patch applies", "patch_apply_rate"),
            ("errors", "n_errors"),
        ),
        sample_note="vulnerable Python functions with tests, written by the project",
    ),
    "e4": EnvSpec(
        short="e4",
        env_id="sv-env-phishing-detection",
        module="sv_env_phishing_detection",
        parse="parse_completion",
        summarize=phishing_summary,
        positive_label="Phishing",
        description="Phishing detection (verifiable evidence, abstention, asymmetric cost)",
        columns=(
            ("accuracy", "accuracy"),
            ("ECE", "ece"),
            ("cost-wtd acc", "cost_weighted_accuracy"),
            ("F1", "f1"),
            ("evidence prec", "evidence_precision"),
            ("abstain", "abstain_rate"),
            ("errors", "n_errors"),
        ),
        sample_note="generated emails in English, German, Spanish and French",
    ),
}
