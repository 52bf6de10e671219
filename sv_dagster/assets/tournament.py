"""tournament/<attack>_<defense>: an attack environment's attacker against its counterpart
defense environment's defender over alternating rounds (E5 and E6: tournament/e5_e6)."""

from __future__ import annotations

import dagster as dg
from pydantic import Field

from sv_dagster.assets.common import artifact_dir, write_json
from sv_dagster.assets.recipe import Artifact, provenance_asset
from sv_dagster.core.artifacts.paths import outputs_root
from sv_dagster.core.envs import EnvSpec, counterpart_pairs, pair_key, pair_label
from sv_dagster.resources import ModelRegistry


def tournament_key(attack: EnvSpec, defense: EnvSpec) -> dg.AssetKey:
    return dg.AssetKey(["tournament", pair_key(attack, defense)])


def tournament_keys() -> list[dg.AssetKey]:
    return [tournament_key(attack, defense) for attack, defense in counterpart_pairs()]


class TournamentConfig(dg.Config):
    attacker_model: str = Field(default="heuristic", description="Registry model playing the attacker.")
    defender_model: str = Field(
        default="heuristic", description="Registry model playing the defender (and the attacker's target)."
    )
    rounds: int = Field(default=3, ge=1, le=20, description="Alternating rounds.")
    limit: int | None = Field(
        default=None, description="Behaviors per round, drawn by a shuffle under `seed` (default: all)."
    )
    seed: int = Field(default=42, description="Selects the behaviors when `limit` is set.")
    concurrency: int = Field(default=8, ge=1, description="Dialogues played at once.")


def build_tournament_asset(attack: EnvSpec, defense: EnvSpec) -> dg.AssetsDefinition:
    @provenance_asset(
        key=tournament_key(attack, defense),
        ins={
            "behaviors": dg.AssetIn(key=["dataset", attack.short]),
            "probes": dg.AssetIn(key=["dataset", defense.short]),
        },
        group_name="tournaments",
        kinds={"json", "png"},
        description=f"{pair_label(attack, defense)} tournament: alternating rounds, each side frozen while the other "
        "moves; attacks that succeed in round k become the defender's probes and known attacks in round k+1. "
        "Per-round attacker success with a 95% bootstrap CI, the defender's unsafe and over-refusal rates, and "
        "the curve (outputs/tournaments/<date>_<run>/).",
    )
    def tournament(
        context: dg.AssetExecutionContext,
        config: TournamentConfig,
        behaviors: Artifact,
        probes: Artifact,
        models: ModelRegistry,
    ) -> Artifact:
        return _play(context, config, behaviors, probes, models, attack, defense)

    return tournament


def tournament_assets() -> list[dg.AssetsDefinition]:
    return [build_tournament_asset(attack, defense) for attack, defense in counterpart_pairs()]


def _play(
    context: dg.AssetExecutionContext,
    config: TournamentConfig,
    behaviors: Artifact,
    probes: Artifact,
    models: ModelRegistry,
    attack: EnvSpec,
    defense: EnvSpec,
) -> Artifact:
    from sv_dagster.core.evals.tournament import plot_success_curve, run_tournament
    from sv_dagster.core.reporting.figures import rounds_markdown, success_curve

    out = artifact_dir(context, "tournaments")
    attacker, defender = models.spec(config.attacker_model), models.spec(config.defender_model)
    result = run_tournament(
        attack,
        defense,
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
    # SAMPLE when either side's test split holds project-written rows.
    sample = bool(behaviors.facts.get("sample", True) or probes.facts.get("sample", True))
    data = {
        **result.to_dict(),
        "attacker": attacker.public_dict(),
        "defender": defender.public_dict(),
        "sample": sample,
    }
    write_json(out / "tournament.json", data)
    plot = plot_success_curve(result, out / "success_curve.png")
    curve = success_curve(result)
    context.log.info(f"tournament {attacker.name} vs {defender.name}: attacker success per round {curve}")
    table = rounds_markdown(result)
    return Artifact(
        path=out,
        config={**config.model_dump(), "attacker": attacker.public_dict(), "defender": defender.public_dict()},
        seed=config.seed,
        packages=(attack.env_id, defense.env_id),
        facts={
            "sample": sample,
            "safety_classifier": result.classifier,
            "classifier_agreement": result.classifier_agreement,
        },
        metadata={
            "success_curve": curve,
            "rounds": dg.MetadataValue.md("\n".join(table)),
            "classifier": result.classifier,
            "classifier_agreement": dg.MetadataValue.json(result.classifier_agreement or {}),
            "plot": dg.MetadataValue.path(str(plot)),
        },
        files={"tournament": out / "tournament.json", "plot": plot, "novelty_memory": out / "novelty_memory.jsonl"},
    )
