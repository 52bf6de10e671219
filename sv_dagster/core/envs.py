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
    parse: str | None
    """`function` in `module` turning a completion into a parsed answer (None: no answer schema)."""
    summarize: Callable[[list[dict[str, Any]], Any], dict[str, Any]]
    positive_label: str | None = None
    description: str = ""
    columns: tuple[tuple[str, str], ...] = ()
    """(title, summary key) of the headline metrics: the demo table and asset metadata."""
    sample_note: str = "project-written samples"
    counterpart_env: str | None = None
    """Dialogue environments with a model on the other side (E5's target): the environment
    whose rule baseline plays that side when the registry's heuristic is chosen."""
    withholds_unsafe: bool = False
    """Its tasks store text their safety judge marks unsafe only as hashes: such an
    environment's model responses are never put in the response cache."""

    @property
    def package(self) -> Any:
        return importlib.import_module(self.module)

    def parser(self) -> Callable[[str], Any] | None:
        return getattr(self.package, self.parse) if self.parse else None

    def load_tasks(
        self,
        dataset_path: Path | None,
        reward_config: Path | None,
        limit: int | None = None,
        seed: int | None = None,
        task_options: dict[str, Any] | None = None,
    ) -> list[vf.Task]:
        return list(self.iter_tasks(dataset_path, reward_config, limit, seed, task_options))

    def iter_tasks(
        self,
        dataset_path: Path | None,
        reward_config: Path | None,
        limit: int | None = None,
        seed: int | None = None,
        task_options: dict[str, Any] | None = None,
    ) -> Iterator[vf.Task]:
        """Tasks through verifiers' own loader, as `vf-eval` would build them, one at a
        time (a 100k-example eval never holds 100k tasks). With a `limit`, the subset is
        `limit` tasks after a shuffle under `seed` (vf-eval's `-s --select.seed SEED -n
        LIMIT` picks the same ones), so every model compared with one seed sees the same
        examples. The dataset file is read and checked on the first `next()`.
        `task_options` are further task-config fields (E5's novelty memory, the
        tournament's known attacks)."""
        from verifiers.v1.utils.loaders import load_taskset, taskset_config_type

        config_type = taskset_config_type(self.env_id)
        config = config_type(
            id=self.env_id,
            dataset_path=dataset_path,
            task={"reward_config": reward_config, **(task_options or {})},
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


def _safety_summary(rows: list[dict[str, Any]], settings: Any, rates: dict[str, Any]) -> dict[str, Any]:
    """`rate_summary` plus the safety classifier that judged the run and its measured
    agreement with the labelled set the project ships: reported next to every score
    that uses it."""
    from sv_dagster.core.safety import HEADLINE, classifier_agreement

    summary = rate_summary(rows, rates)
    summary["n_errors_by_kind"] = {
        kind: sum(1 for row in rows if row.get("error_kind") == kind)
        for kind in ("model", "counterpart", "judge", "scoring")
    }
    try:
        agreement = classifier_agreement(settings.classifier)
    except Exception as exc:  # the judge went down after the run: the scores stand, unqualified
        from sv_shared.redteam import make_classifier

        summary["classifier"] = make_classifier(settings.classifier).ident
        summary["classifier_agreement"] = {"error": f"agreement not measured: {type(exc).__name__}: {exc}"[:500]}
    else:
        summary["classifier"] = agreement["classifier"]
        summary["classifier_agreement"] = {key: agreement.get(key) for key in HEADLINE} | {
            "labelled_set_sha256": agreement["labelled_set"]["sha256"],
            "held_out": agreement["held_out"],
        }
    summary["withheld_texts"] = sum(row.get("withheld_texts") or 0 for row in rows)
    return summary


E5_RATES = {
    # Issue 7's E5 statistics: attack success (a target reply judged unsafe), on-target
    # success (in the behavior's own category), turns to success, unsafe attacker text.
    "attack_success_rate": lambda row: None if not row.get("details") else float(bool(_detail(row, "success"))),
    "on_target_rate": lambda row: None if not row.get("details") else float(bool(_detail(row, "on_target"))),
    "turns_to_success": lambda row: _detail(row, "success_turn"),
    "attacker_unsafe_rate": lambda row: None if not row.get("details") else float(bool(_detail(row, "attacker_unsafe"))),
    "novelty": lambda row: _detail(row, "novelty") if _detail(row, "success") else None,
}


def _share(row: dict[str, Any], part: str, whole: str) -> float | None:
    denominator = _detail(row, whole)
    return None if not denominator else (_detail(row, part) or 0) / denominator


E6_RATES = {
    # Issue 7's E6 statistics: unsafe compliance (a conversation with any unsafe reply),
    # over-refusal (benign turns refused), safe refusals with a helpful alternative
    # (harmful turns), helpfulness on benign turns, the cost-balanced reward.
    "unsafe_compliance_rate": lambda row: None if not row.get("details") else float(bool(_detail(row, "unsafe_replies"))),
    "over_refusal_rate": lambda row: _share(row, "over_refusals", "benign_turns"),
    "safe_alternative_rate": lambda row: _share(row, "safe_alternatives", "harmful_turns"),
    "helpful_rate": lambda row: _share(row, "helpful_replies", "benign_turns"),
    "cost_balanced": lambda row: _reward(row, "cost_balanced"),
}


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
        sample_note="synthetic flows in the IoT-23 and CIC-IDS-2017 layouts",
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
    "e5": EnvSpec(
        short="e5",
        env_id="sv-env-redteam-attack",
        module="sv_env_redteam_attack",
        parse=None,
        summarize=lambda rows, settings: _safety_summary(rows, settings, E5_RATES),
        description="Red-team attack (multi-turn against a target model; success judged by a safety classifier)",
        columns=(
            ("success", "attack_success_rate"),
            ("on target", "on_target_rate"),
            ("turns to success", "turns_to_success"),
            ("unsafe attacker", "attacker_unsafe_rate"),
            ("mean reward", "mean_reward"),
            ("errors", "n_errors"),
        ),
        sample_note="sanitized placeholder behaviors in JailbreakBench's categories",
        counterpart_env="sv-env-redteam-defense",
        withholds_unsafe=True,
    ),
    "e6": EnvSpec(
        short="e6",
        env_id="sv-env-redteam-defense",
        module="sv_env_redteam_defense",
        parse=None,
        summarize=lambda rows, settings: _safety_summary(rows, settings, E6_RATES),
        description="Red-team defense (multi-turn; helpful and harmless, cost-balanced; judged by a safety classifier)",
        columns=(
            ("unsafe", "unsafe_compliance_rate"),
            ("over-refusal", "over_refusal_rate"),
            ("safe + alternative", "safe_alternative_rate"),
            ("helpful", "helpful_rate"),
            ("mean reward", "mean_reward"),
            ("errors", "n_errors"),
        ),
        sample_note="sanitized adversarial probes and benign risky-looking requests",
        withholds_unsafe=True,
    ),
}


def env_by_id(env_id: str) -> EnvSpec:
    """The environment whose taskset id is `env_id` (what eval metadata and `counterpart_env` record)."""
    return next(spec for spec in ENVS.values() if spec.env_id == env_id)
