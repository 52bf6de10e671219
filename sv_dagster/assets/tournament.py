"""tournament/e5_e6: the E5 attacker against the E6 defender over alternating rounds."""

from __future__ import annotations

import dagster as dg
from pydantic import Field

from sv_dagster.assets.common import artifact_dir, write_json
from sv_dagster.assets.recipe import Artifact, provenance_asset
from sv_dagster.core.paths import outputs_root
from sv_dagster.resources import ModelRegistry

TOURNAMENT = dg.AssetKey(["tournament", "e5_e6"])


class TournamentConfig(dg.Config):
    attacker_model: str = Field(default="heuristic", description="Registry model playing E5's attacker.")
    defender_model: str = Field(default="heuristic", description="Registry model playing E6's defender (and E5's target).")
    rounds: int = Field(default=3, ge=1, le=20, description="Alternating rounds.")
    limit: int | None = Field(default=None, description="Behaviors per round, drawn by a shuffle under `seed` (default: all).")
    seed: int = Field(default=42, description="Selects the behaviors when `limit` is set.")
    concurrency: int = Field(default=8, ge=1, description="Dialogues played at once.")


@provenance_asset(
    key=TOURNAMENT,
    ins={"behaviors": dg.AssetIn(key=["dataset", "e5"]), "probes": dg.AssetIn(key=["dataset", "e6"])},
    group_name="tournaments",
    kinds={"json", "png"},
    description="E5<->E6 tournament: alternating rounds, each side frozen while the other moves; attacks "
    "that succeed in round k become the defender's probes and known attacks in round k+1. Per-round "
    "attacker success with a 95% bootstrap CI, the defender's unsafe and over-refusal rates, and the curve "
    "(outputs/tournaments/<date>_<run>/).",
)
def tournament_e5_e6(
    context: dg.AssetExecutionContext, config: TournamentConfig, behaviors: Artifact, probes: Artifact, models: ModelRegistry
) -> Artifact:
    from sv_dagster.core.tournament import plot_success_curve, run_tournament

    out = artifact_dir(context, "tournaments")
    attacker, defender = models.spec(config.attacker_model), models.spec(config.defender_model)
    result = run_tournament(
        attacker,
        defender,
        lambda spec, env_id: models.backend(spec.name, env_id),
        outputs_root=outputs_root(),
        run_id=context.run_id[:8],
        out_dir=out,
        rounds=config.rounds,
        behaviors_path=behaviors.files["test"],
        probes_path=probes.files["test"],
        limit=config.limit,
        seed=config.seed,
        concurrency=config.concurrency,
    )
    data = {**result.to_dict(), "attacker": attacker.public_dict(), "defender": defender.public_dict(), "sample": True}
    write_json(out / "tournament.json", data)
    plot = plot_success_curve(result, out / "success_curve.png")
    curve = " -> ".join(f"{r.attacker_success_rate:.2f}" if r.attacker_success_rate is not None else "n/a"
                        for r in result.rounds)
    context.log.info(f"tournament {attacker.name} vs {defender.name}: attacker success per round {curve}")
    table = ["| round | attacker success (95% CI) | defender unsafe | over-refusal | known attacks |", "|---|---|---|---|---|"]
    for r in result.rounds:
        ci = r.attacker_success_ci95
        table.append(
            f"| {r.round} | {r.attacker_success_rate:.2f} "
            + (f"[{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")
            + f" | {'' if r.defender_unsafe_rate is None else f'{r.defender_unsafe_rate:.2f}'}"
            + f" | {'' if r.defender_over_refusal_rate is None else f'{r.defender_over_refusal_rate:.2f}'}"
            + f" | {r.known_attacks} |"
        )
    return Artifact(
        path=out,
        config={**config.model_dump(), "attacker": attacker.public_dict(), "defender": defender.public_dict()},
        seed=config.seed,
        packages=("sv-env-redteam-attack", "sv-env-redteam-defense"),
        facts={"sample": True, "safety_classifier": result.classifier,
               "classifier_agreement": result.classifier_agreement},
        metadata={
            "success_curve": curve,
            "rounds": dg.MetadataValue.md("\n".join(table)),
            "classifier": result.classifier,
            "classifier_agreement": dg.MetadataValue.json(result.classifier_agreement or {}),
            "plot": dg.MetadataValue.path(str(plot)),
        },
        files={"tournament": out / "tournament.json", "plot": plot, "novelty_memory": out / "novelty_memory.jsonl"},
    )
