"""Training jobs.

- `sft_eN`: dataset -> sft_data -> base -> SFT for environment N (with the sft_data its
  `sft.mix` draws from).
- `rlft_eN`: `sft_eN`, then GRPO (stage 1) -> automated safety review (a blocking check) ->
  evals of the base, SFT and stage-1 checkpoints on N's test split, with triage.
  `dagster job execute -j rlft_e1` runs it as written.
- `rlft_stage2`: the curriculum stage over several environments from the reviewed E1
  stage-1 checkpoint, its review and evals.
- `promote_eN`: a human's sign-off and the promotion it allows (`sv-dagster signoff`).
- `cotrain_<attack>_<defense>` (e.g. `cotrain_e5_e6`): the attacker/defender co-training cycles and their evals.
- `study_<name>` (e.g. `study_h1_e1`): a hypothesis tested over seeds (configs/studies/), with
  the data and base model it starts from.
Synthetic batches are not re-made here: `sft_data` reads the latest accepted batch.
"""

from __future__ import annotations

import dagster as dg

from sv_dagster.assets.evals import eval_asset_key
from sv_dagster.assets.triage import triage_asset_key
from sv_dagster.core.envs import ENVS, pair_key, pair_label
from sv_dagster.core.models.registry import ModelSpec
from sv_dagster.training import catalog


def _keys(*paths: str) -> list[dg.AssetKey]:
    return [dg.AssetKey(path.split("/")) for path in paths]


def _data(env: str) -> dg.AssetSelection:
    # The dataset and what feeds it (corpora); never the synthetic batches (a partitioned job).
    return dg.AssetSelection.assets(*_keys(f"dataset/{env}")).upstream() | dg.AssetSelection.assets(
        *_keys(f"sft_data/{env}")
    )


def _sft_data(env: str) -> dg.AssetSelection:
    """`env`'s data and that of the environments its SFT mixes in (`sft.mix`)."""
    selection = _data(env)
    for other in catalog.sft_mix_envs(env):
        selection = selection | _data(other)
    return selection


def _evals(models: dict[str, ModelSpec], assets: set[str]) -> dg.AssetSelection:
    keys = [
        key
        for model in models.values()
        if model.checkpoint_asset in assets
        for env in model.envs
        for key in (eval_asset_key(ENVS[env], model), triage_asset_key(ENVS[env], model))
    ]
    return dg.AssetSelection.assets(*keys)


def training_jobs(models: dict[str, ModelSpec]) -> list[dg.UnresolvedAssetJobDefinition]:
    """Training steps carry their own pod sizes (op tags: step pods read those)."""
    jobs = []
    for env in catalog.training_envs():
        sft = _sft_data(env) | dg.AssetSelection.assets(
            *_keys(catalog.checkpoint_key(env, catalog.BASE.asset), catalog.checkpoint_key(env, catalog.SFT.asset))
        )
        review = catalog.review_key(env, catalog.RLFT1.asset)
        chain = sft | dg.AssetSelection.assets(*_keys(catalog.checkpoint_key(env, catalog.RLFT1.asset), review))
        evaluated = {
            catalog.checkpoint_key(env, catalog.BASE.asset),
            catalog.checkpoint_key(env, catalog.SFT.asset),
            review,
        }
        jobs += [
            dg.define_asset_job(
                name=f"sft_{env}",
                selection=sft,
                tags={"sv/env": env, "sv/program": "training"},
                description=f"{ENVS[env].env_id}: sft_data -> base model -> SFT (TRL), in a training process via Pipes.",
            ),
            dg.define_asset_job(
                name=f"rlft_{env}",
                selection=chain | _evals(models, evaluated),
                tags={"sv/env": env, "sv/program": "training"},
                description=f"{ENVS[env].env_id}: SFT -> GRPO with the environment's rewards -> automated safety review "
                "(blocking) -> evals of the base, SFT and stage-1 checkpoints. Promotion needs `sv-dagster signoff`.",
            ),
            dg.define_asset_job(
                name=f"promote_{env}",
                selection=dg.AssetSelection.assets(
                    *_keys(f"safety_signoff/{env}", catalog.checkpoint_key(env, catalog.PROMOTED.asset))
                ),
                tags={"sv/env": env, "sv/program": "promotion"},
                description=f"Record a human sign-off of the reviewed {env} checkpoint and promote it when approved "
                "(run by `sv-dagster signoff`).",
            ),
        ]
    owner = catalog.stage2_env()
    if owner is not None:
        envs = catalog.training_config(owner).curriculum.envs
        stage2: dg.AssetSelection = dg.AssetSelection.assets(*_keys(catalog.STAGE2, catalog.STAGE2_REVIEW))
        for env in envs:
            stage2 = stage2 | _data(env)
        jobs.append(
            dg.define_asset_job(
                name="rlft_stage2",
                selection=stage2 | _evals(models, {catalog.STAGE2_REVIEW}),
                tags={"sv/program": "training"},
                description=f"Stage 2: a curriculum over {', '.join(envs)} from the reviewed {owner.upper()} stage-1 checkpoint "
                f"(materialize rlft_{owner} and the other environments' sft_data first), its review and evals.",
            )
        )
    for attack, defense in catalog.cotrain_pairs():
        a, d = attack.short, defense.short
        cycles = catalog.training_config(a).cotrain.cycles
        cotrain = {catalog.checkpoint_key(env, f"cotrain_{k}") for k in range(1, cycles + 1) for env in (a, d)}
        sft_chains = (
            _sft_data(a)
            | _sft_data(d)
            | dg.AssetSelection.assets(
                *_keys(*(catalog.checkpoint_key(env, stage) for env in (a, d) for stage in ("base", "sft")))
            )
        )
        jobs.append(
            dg.define_asset_job(
                name=f"cotrain_{pair_key(attack, defense)}",
                selection=sft_chains | dg.AssetSelection.assets(*_keys(*sorted(cotrain))) | _evals(models, cotrain),
                tags={"sv/program": "training"},
                description=f"{pair_label(attack, defense)} co-training: SFT of both, then {cycles} alternating GRPO cycles "
                "(the attacker against the current defender, the defender on the attacks that beat it), and evals of every "
                "cycle's checkpoints.",
            )
        )
    return jobs


def study_jobs(studies: dict[str, tuple[str, dg.AssetKey]]) -> list[dg.UnresolvedAssetJobDefinition]:
    """`studies`: name -> (its environment, its asset key)."""
    return [
        dg.define_asset_job(
            name=f"study_{name}",
            selection=_sft_data(env)
            | dg.AssetSelection.assets(*_keys(catalog.checkpoint_key(env, catalog.BASE.asset)), key),
            tags={"sv/env": env, "sv/program": "study"},
            description=f"Study {name}: the {env} data and base model, then per seed SFT -> GRPO with a dev curve, "
            "test evals of every stage and paired tests between them; writes study.md, study.json and a plot.",
        )
        for name, (env, key) in studies.items()
    ]
