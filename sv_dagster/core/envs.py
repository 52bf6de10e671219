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

from sv_dagster.core.summary import classification_summary

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
}
