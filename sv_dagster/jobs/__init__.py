"""Jobs.

- `eval_eN`: environment N's path (corpus -> dataset -> eval -> triage) for the registry's
  `default: true` models; other models are materialized from the UI or `make eval-eN`.
Program jobs re-curate the datasets first (cheap, and picks up corpus updates).
- `demo`: every environment's `eval_eN` in one run (`make demo`).
- `rescore_eN`: the stored completions of the latest evals scored again (verifier change).
- `weekly_sweep`: quick evals (N=10, seed 42) of the `sweep: true` models, on the test split
  and, where a source is marked `ood: true`, the `ood` split (eval_ood/<env>/<model>), triage,
  the weekly report and the scoreboard.
- `biweekly_full_eval`: full evals of the sweep models (test and ood splits) and the red-team
  tournaments.
- `tournament_<attack>_<defense>` (e.g. `tournament_e5_e6`): a tournament (heuristic attacker and
  defender unless configured).
- `nightly_regression`: full evals of the `nightly: true` models; their regression gates run
  with them.
- `monthly_report`: the monthly report and the scoreboard.
"""

from __future__ import annotations

import dagster as dg

from sv_dagster.assets.evals import eval_asset_key, ood_eval_asset_key, ood_eval_models, rescore_asset_key
from sv_dagster.assets.tournament import tournament_key, tournament_keys
from sv_dagster.assets.triage import triage_asset_key
from sv_dagster.core.envs import EnvSpec, counterpart_pairs, pair_key, pair_label
from sv_dagster.core.models.registry import ModelSpec, RegistryError

QUICK_SWEEP_N = 10
STANDARD_SEED = 42
REPORTS_WEEKLY = dg.AssetKey(["reports", "weekly"])
REPORTS_MONTHLY = dg.AssetKey(["reports", "monthly"])
SCOREBOARD = dg.AssetKey(["reports", "scoreboard"])


def _default_models(env: EnvSpec, models: dict[str, ModelSpec]) -> list[ModelSpec]:
    chosen = [m for m in models.values() if m.default and m.supports(env.short)]
    if not chosen:
        raise RegistryError(f"no default model in the registry evaluates {env.short}; mark one `default: true`")
    return chosen


def with_data(evals: list[dg.AssetKey]) -> dg.AssetSelection:
    """The evals and their datasets with what feeds those (corpora), but never a trained
    model's checkpoint chain: an eval of a checkpoint reads the latest one (and is skipped
    when there is none); training runs in its own jobs."""
    datasets = {dg.AssetKey(["dataset", key.path[1]]) for key in evals}
    return dg.AssetSelection.assets(*evals) | dg.AssetSelection.assets(*datasets).upstream()


def _eval_selection(env: EnvSpec, chosen: list[ModelSpec]) -> dg.AssetSelection:
    return with_data([eval_asset_key(env, m) for m in chosen]) | dg.AssetSelection.assets(
        *(triage_asset_key(env, m) for m in chosen)
    )


def eval_job(env: EnvSpec, models: dict[str, ModelSpec]) -> dg.UnresolvedAssetJobDefinition:
    chosen = _default_models(env, models)
    return dg.define_asset_job(
        name=f"eval_{env.short}",
        selection=_eval_selection(env, chosen),
        description=f"{env.env_id}: corpus -> dataset -> eval -> triage for the default models "
        f"({', '.join(m.name for m in chosen)}).",
        tags={"sv/env": env.short},
    )


def _tournaments() -> str:
    """The tournaments named for job descriptions, e.g. "the E5<->E6 tournament"."""
    return "the " + " and ".join(f"{pair_label(a, d)} tournament" for a, d in counterpart_pairs())


def demo_job(envs: list[EnvSpec], models: dict[str, ModelSpec]) -> dg.UnresolvedAssetJobDefinition:
    """Every environment's `eval_eN` in one run: what `make demo` executes."""
    selection: dg.AssetSelection = dg.AssetSelection.assets(*tournament_keys()).upstream()
    for env in envs:
        selection = selection | _eval_selection(env, _default_models(env, models))
    return dg.define_asset_job(
        name="demo",
        selection=selection,
        description="The embedded demo: each environment's default models (rule baselines and oracles) "
        f"on its bundled SAMPLE data ({', '.join(env.short for env in envs)}), and {_tournaments()}.",
        tags={"sv/program": "demo"},
    )


def tournament_jobs() -> list[dg.UnresolvedAssetJobDefinition]:
    return [
        dg.define_asset_job(
            name=f"tournament_{pair_key(attack, defense)}",
            selection=dg.AssetSelection.assets(tournament_key(attack, defense)).upstream(),
            description=f"{pair_label(attack, defense)} tournament: alternating attacker and defender rounds (models "
            "from the run config; the rule baselines by default).",
            tags={"sv/program": "tournament"},
        )
        for attack, defense in counterpart_pairs()
    ]


def rescore_job(env: EnvSpec, models: dict[str, ModelSpec]) -> dg.UnresolvedAssetJobDefinition:
    chosen = [m for m in models.values() if m.default and m.supports(env.short)]
    return dg.define_asset_job(
        name=f"rescore_{env.short}",
        selection=dg.AssetSelection.assets(*(rescore_asset_key(env, m) for m in chosen)),
        description=f"Re-score the latest {env.env_id} evals of the default models with the current verifier "
        "(no model calls); other models' rescore assets from the UI.",
        tags={"sv/env": env.short},
    )


def _evals(envs: list[EnvSpec], models: list[ModelSpec]) -> tuple[list[dg.AssetKey], list[dg.AssetKey]]:
    pairs = [(env, m) for env in envs for m in models if m.supports(env.short)]
    return [eval_asset_key(e, m) for e, m in pairs], [triage_asset_key(e, m) for e, m in pairs]


def _ood_evals(envs: list[EnvSpec], models: dict[str, ModelSpec]) -> list[dg.AssetKey]:
    """The OOD evals of the sweep models, for each environment whose dataset has an `ood` split."""
    return [ood_eval_asset_key(env, m) for env in envs for m in ood_eval_models(env, models)]


def _eval_config(keys: list[dg.AssetKey], **config) -> dict:
    return {"ops": {"__".join(key.path): {"config": config} for key in keys}}


def program_jobs(envs: list[EnvSpec], models: dict[str, ModelSpec]) -> list[dg.UnresolvedAssetJobDefinition]:
    sweep = [m for m in models.values() if m.sweep]
    nightly = [m for m in models.values() if m.nightly]
    sweep_evals, sweep_triage = _evals(envs, sweep)
    # Out-of-distribution evals ride with the sweep (same N and seed), kept as their own assets.
    sweep_evals += _ood_evals(envs, models)
    nightly_evals, nightly_triage = _evals(envs, nightly)
    return [
        dg.define_asset_job(
            name="weekly_sweep",
            selection=with_data(sweep_evals) | dg.AssetSelection.assets(*sweep_triage, REPORTS_WEEKLY, SCOREBOARD),
            config=_eval_config(sweep_evals, limit=QUICK_SWEEP_N, cap_limit=True, seed=STANDARD_SEED),
            description=f"Quick sweep: at most N={QUICK_SWEEP_N} examples (seed {STANDARD_SEED}) per env for the "
            f"sweep models ({', '.join(m.name for m in sweep)}), then the weekly report.",
            tags={"sv/program": "weekly_sweep"},
        ),
        dg.define_asset_job(
            name="biweekly_full_eval",
            selection=with_data(sweep_evals)
            | dg.AssetSelection.assets(*tournament_keys()).upstream()
            | dg.AssetSelection.assets(*sweep_triage, SCOREBOARD),
            config=_eval_config(sweep_evals, seed=STANDARD_SEED),
            description=f"Full evals of the sweep models on every environment and {_tournaments()}.",
            tags={"sv/program": "biweekly_full_eval"},
        ),
        dg.define_asset_job(
            name="nightly_regression",
            selection=with_data(nightly_evals) | dg.AssetSelection.assets(*nightly_triage),
            config=_eval_config(nightly_evals, seed=STANDARD_SEED),
            description=f"Nightly regression of {', '.join(m.name for m in nightly)}; each eval's "
            "regression gate (a blocking asset check) runs with it.",
            tags={"sv/program": "nightly_regression"},
        ),
        dg.define_asset_job(
            name="monthly_report",
            selection=dg.AssetSelection.assets(REPORTS_MONTHLY, SCOREBOARD),
            description="The monthly consolidated report and the scoreboard.",
            tags={"sv/program": "monthly_report"},
        ),
    ]
