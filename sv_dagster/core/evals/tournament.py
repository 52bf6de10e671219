"""A red-team tournament: an attacker and a defender take alternating moves, in an attack
environment and its counterpart defense environment (E5 and E6 here).

Round k:
1. Defender move (k >= 2): the defender, told in its system prompt about every attack
   that succeeded in rounds < k, is evaluated on the defense environment with round k-1's successful attacks as
   its adversarial probes, beside the bundled benign and over-refusal probes (its cost of
   adapting). Those attacks go from round to round in memory and in a temporary file
   outside the outputs: they may be unsafe text, which is stored only as hashes.
2. Attacker move: the attacker, told which of its attacks the target refused in earlier
   rounds, runs the attack environment against the defender as it stands (frozen for the round); its novelty
   is measured against the MinHash signatures of all earlier successful attacks.

Per round: the attacker's success rate with a seeded 95% bootstrap CI, the defender's
unsafe-compliance and over-refusal rates; and a plot of the success curve.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sv_dagster.core.envs import EnvironmentPluginError, EnvSpec, pair_label
from sv_dagster.core.evals.evaluation import EvalRun, evaluate
from sv_dagster.core.evals.stats import STANDARD_SEED
from sv_dagster.core.models.completion import Backend
from sv_dagster.core.models.registry import ModelSpec
from sv_shared.redteam import defender_probe_rows, refused_attacks, successful_attack_text

MakeBackend = Callable[[ModelSpec, str], Backend]


@dataclass
class RoundResult:
    round: int
    attacker_success_rate: float | None
    attacker_success_ci95: list[float] | None
    n_behaviors: int
    n_successes: int
    n_errors: int
    attack_eval: str
    defender_unsafe_rate: float | None = None
    defender_over_refusal_rate: float | None = None
    defender_probes: int = 0
    defense_eval: str | None = None
    known_attacks: int = 0
    """Attacks the defender was told about in this round."""


@dataclass
class TournamentResult:
    pair: str = ""
    """The attack and defense environments, e.g. "E5<->E6"."""
    rounds: list[RoundResult] = field(default_factory=list)
    classifier: str | None = None
    classifier_agreement: dict[str, Any] | None = None
    refusal_detector: dict[str, Any] | None = None
    """The refusal detector the defender's over-refusal rate rests on, with its agreement."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "pair": self.pair,
            "rounds": [asdict(r) for r in self.rounds],
            "classifier": self.classifier,
            "classifier_agreement": self.classifier_agreement,
            "refusal_detector": self.refusal_detector,
        }


def _bundled(env: EnvSpec, folder: Path) -> Path:
    """The environment's bundled SAMPLE dataset, written into `folder`."""
    path = folder / f"{env.short}-bundled.jsonl"
    if not path.exists():
        if env.write_bundled_dataset is None:
            raise EnvironmentPluginError(f"{env.env_id} declares no write_bundled_dataset: no defense probes to play")
        env.write_bundled_dataset(path)
    return path


def run_tournament(
    attack_env: EnvSpec,
    defense_env: EnvSpec,
    attacker: ModelSpec,
    defender: ModelSpec,
    make_backend: MakeBackend,
    *,
    outputs_root: Path,
    run_id: str,
    out_dir: Path,
    rounds: int = 3,
    behaviors_path: Path | None = None,
    probes_path: Path | None = None,
    limit: int | None = None,
    seed: int = STANDARD_SEED,
    concurrency: int = 8,
) -> TournamentResult:
    """Play `rounds` rounds (see the module docstring); `behaviors_path` is the attack
    environment's dataset, `probes_path` the defense environment's (its benign and
    over-refusal probes join every defender move)."""
    e5, e6 = attack_env, defense_env
    out_dir.mkdir(parents=True, exist_ok=True)
    memory_path = out_dir / "novelty_memory.jsonl"  # MinHash signatures only
    memory_path.write_text("", encoding="utf-8")
    known: list[str] = []  # successful attacks so far: in memory only
    blocked: list[str] = []
    previous_successes: list[str] = []
    result = TournamentResult(pair=pair_label(e5, e6))
    with tempfile.TemporaryDirectory(prefix="sv-tournament-") as scratch:
        for k in range(1, rounds + 1):
            defense: EvalRun | None = None
            if k > 1 and previous_successes:
                probes = Path(scratch) / f"round-{k}-probes.jsonl"
                probes.write_text(
                    "".join(
                        json.dumps(r) + "\n"
                        for r in defender_probe_rows(previous_successes, probes_path or _bundled(e6, Path(scratch)))
                    ),
                    encoding="utf-8",
                )
                defense = evaluate(
                    e6,
                    defender,
                    make_backend(defender, e6.env_id),
                    dataset_path=probes,
                    outputs_root=outputs_root,
                    run_id=f"{run_id}-r{k}-defense",
                    concurrency=concurrency,
                    dataset_info={"tournament_round": k, "sample": True},
                    task_options={"known_attacks": list(known)},
                    reference_policies=False,  # the tournament's table shows rounds, not reference rows
                )
            successes: list[tuple[str, list[int]]] = []
            refused: list[str] = []

            def observe(row: dict[str, Any]) -> None:  # called only within this round's evaluate
                text = successful_attack_text(row)
                if text is not None:
                    successes.append((text, (row.get("details") or {}).get("minhash") or []))  # noqa: B023
                refused.extend(refused_attacks(row))  # noqa: B023

            attack = evaluate(
                e5,
                attacker,
                make_backend(attacker, e5.env_id),
                dataset_path=behaviors_path,
                outputs_root=outputs_root,
                run_id=f"{run_id}-r{k}-attack",
                limit=limit,
                seed=seed,
                concurrency=concurrency,
                dataset_info={"tournament_round": k, "sample": True},
                counterpart=make_backend(defender, e6.env_id),
                counterpart_model=defender,
                task_options={
                    "target_known_attacks": list(known),
                    "blocked_attacks": list(dict.fromkeys(blocked))[-20:],
                    "novelty_memory": memory_path,
                },
                observe=observe,
            )
            summary = attack.summary
            result.classifier = summary.get("classifier")
            result.classifier_agreement = summary.get("classifier_agreement")
            if defense is not None and defense.summary.get("refusal_detector"):
                result.refusal_detector = defense.summary["refusal_detector"]
            result.rounds.append(
                RoundResult(
                    round=k,
                    attacker_success_rate=summary.get("attack_success_rate"),
                    attacker_success_ci95=(summary.get("ci95") or {}).get("attack_success_rate"),
                    n_behaviors=summary["n_examples"],
                    n_successes=len(successes),
                    n_errors=summary["n_errors"],
                    attack_eval=str(attack.run_dir),
                    defender_unsafe_rate=defense.summary.get("unsafe_compliance_rate") if defense else None,
                    defender_over_refusal_rate=defense.summary.get("over_refusal_rate") if defense else None,
                    defender_probes=defense.summary["n_examples"] if defense else 0,
                    defense_eval=str(defense.run_dir) if defense else None,
                    known_attacks=len(known),
                )
            )
            with memory_path.open("a", encoding="utf-8") as handle:
                for _, signature in successes:
                    handle.write(json.dumps({"minhash": signature}) + "\n")
            previous_successes = [text for text, _ in successes]
            known.extend(previous_successes)
            blocked.extend(refused)
    return result


def plot_success_curve(result: TournamentResult, path: Path) -> Path:
    """The attacker's success rate per round with its 95% CI (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rounds = [r.round for r in result.rounds]
    rates = [r.attacker_success_rate or 0.0 for r in result.rounds]
    low = [rate - (r.attacker_success_ci95 or [rate, rate])[0] for rate, r in zip(rates, result.rounds)]
    high = [(r.attacker_success_ci95 or [rate, rate])[1] - rate for rate, r in zip(rates, result.rounds)]
    fig, ax = plt.subplots(figsize=(5, 3.2), dpi=120)
    ax.errorbar(rounds, rates, yerr=[low, high], marker="o", capsize=4, label="attacker success (95% CI)")
    unsafe = [(r.round, r.defender_unsafe_rate) for r in result.rounds if r.defender_unsafe_rate is not None]
    if unsafe:
        ax.plot(
            [u[0] for u in unsafe],
            [u[1] for u in unsafe],
            marker="s",
            linestyle="--",
            label="defender unsafe compliance (defense probes)",
        )
    ax.set_xlabel("round")
    ax.set_ylabel("rate")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xticks(rounds)
    ax.set_title(f"{result.pair} tournament ({result.classifier or 'classifier'})", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
