"""synthetic/<env>: a daily batch of generated, verifier-labelled examples per environment,
with a 5% human spot-check (`spot_check`, a non-blocking asset check that stays failing
until a reviewer records a decision with `sv-dagster review synthetic ...`).

Files: `outputs/datasets/<env>/synthetic/<partition>_<run8>/` - examples.jsonl (the
environment's dataset schema; a columnar one also `<table>.parquet`), rejects.jsonl, spot_check.jsonl,
metadata.json. The run id in the folder name keeps a re-materialized partition from
overwriting files whose hash an earlier materialization recorded.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import dagster as dg
from pydantic import Field

from sv_dagster.assets.recipe import Artifact, provenance_asset
from sv_dagster.core.artifacts.paths import outputs_root
from sv_dagster.core.data.synthetic.review import ReviewError
from sv_dagster.core.envs import ENVS, EnvSpec
from sv_dagster.instance.synthetic import (
    CHECK_NAME,
    check_outcome,
    latest_batch,
    latest_record,
    record_path,
    record_version,
)
from sv_dagster.resources import ModelRegistry
from sv_shared.synthetic import SyntheticSpec

SYNTHETIC_PARTITIONS = dg.DailyPartitionsDefinition(start_date="2026-11-01")
SYNTHETIC_ENVS = [env for env in ENVS.values() if env.synthetic is not None]


def _synthetic(env: EnvSpec) -> SyntheticSpec:
    assert env.synthetic is not None  # only SYNTHETIC_ENVS get synthetic assets
    return env.synthetic


class SyntheticConfigBase(dg.Config):
    batch_size: int | None = Field(
        default=None,
        ge=1,
        le=10_000_000,
        description="Template candidates (default per env: "
        + ", ".join(f"{env.short.upper()} {_synthetic(env).batch_size}" for env in SYNTHETIC_ENVS)
        + ").",
    )
    seed: int = Field(default=42, description="Combined with the env and the partition into the batch's seed.")
    spot_check_fraction: float = Field(
        default=0.05, gt=0.0, le=1.0, description="Share of rows in the review queue (>= 1 row)."
    )
    seed_models: list[str] = Field(
        default_factory=list,
        description="Registry models (OpenAI-compatible) that vary template rows; empty: templates only.",
    )
    temperatures: list[float] = Field(
        default_factory=lambda: [0.3, 0.7, 1.0], description="The sweep each seed model samples at."
    )
    variations_per_model: int = Field(
        default=4, ge=1, le=10_000, description="Template rows each (model, temperature) varies."
    )


def _config_class() -> type[dg.Config]:
    """The common fields and every environment's own options (`SyntheticSpec.options`): one
    config class for every synthetic asset, so a run config means the same for each."""
    options = {option.name: option for env in SYNTHETIC_ENVS for option in _synthetic(env).options}
    namespace: dict[str, Any] = {
        "__annotations__": {name: type(o.default) for name, o in options.items()},
        "__module__": __name__,
    }
    for name, option in options.items():
        namespace[name] = Field(default=option.default, gt=option.gt, le=option.le, description=option.description)
    return type("SyntheticConfig", (SyntheticConfigBase,), namespace)


if TYPE_CHECKING:  # the checker sees the common fields; each environment's options are read by name
    SyntheticConfig = SyntheticConfigBase
else:
    SyntheticConfig = _config_class()


def synthetic_deps(env: EnvSpec, failure_keys: list[dg.AssetKey]) -> list[dg.AssetKey]:
    """What the environment's generator reads (its `SyntheticSpec`): its curated dataset,
    earlier defender failures (the evals of the environments it names and the tournaments,
    from `failure_keys`), another environment's synthetic batch of the same partition."""
    synthetic = _synthetic(env)
    shorts = {other.env_id: other.short for other in ENVS.values()}
    failure_envs = {shorts[env_id] for env_id in synthetic.failures_from if env_id in shorts}
    deps = [dg.AssetKey(["dataset", env.short])] if synthetic.reads_dataset else []
    deps += [key for key in failure_keys if key.path[0] == "eval" and key.path[1] in failure_envs]
    if synthetic.failures_from_tournaments:
        deps += [key for key in failure_keys if key.path[0] == "tournament"]
    if synthetic.pairs_with in shorts:
        deps.append(dg.AssetKey(["synthetic", shorts[synthetic.pairs_with]]))
    return deps


def _upstream(context: dg.AssetExecutionContext, env: EnvSpec, deps: list[dg.AssetKey]):
    """Seed locations from the instance (the latest materialization of each dependency;
    the same partition for another synthetic batch), and what was read, for provenance."""
    from sv_dagster.core.data.synthetic import Upstream

    upstream, consumed = Upstream(), {}
    for key in deps:
        partitioned = key.path[0] == "synthetic"
        record = latest_record(context.instance, key, context.partition_key if partitioned else None)
        path = record_path(record)
        consumed[key.to_user_string()] = (
            {"data_version": record_version(record), "path": str(path)} if record else "never materialized"
        )
        if path is None or not path.exists():
            continue
        if key.path[0] == "dataset":
            upstream.dataset_dir = path
            assert record is not None and record.asset_materialization is not None  # it has a path
            sample = record.asset_materialization.metadata.get("sample")
            upstream.dataset_sample = bool(sample.value) if sample is not None else None
        elif partitioned:
            upstream.paired_batch_dir = path
        elif key.path[0] == "tournament":
            upstream.tournament_dirs.append(path)
        else:
            upstream.failure_dirs.append(path)
    return upstream, consumed


def build_synthetic_asset(env: EnvSpec, failure_keys: list[dg.AssetKey] | None = None) -> dg.AssetsDefinition:
    deps = synthetic_deps(env, failure_keys or [])

    @provenance_asset(
        key=["synthetic", env.short],
        deps=deps,
        partitions_def=SYNTHETIC_PARTITIONS,
        group_name="synthetic",
        kinds=set(_synthetic(env).kinds),
        tags={"sv/env": env.short},
        description=f"{env.env_id}: daily synthetic batch - {_synthetic(env).description}. 5% goes to a human spot-check "
        "(check `spot_check`).",
    )
    def synthetic_batch(context: dg.AssetExecutionContext, config: SyntheticConfig, models: ModelRegistry) -> Artifact:
        from sv_dagster.core.data.synthetic import BatchSpec, build_batch, derive_seed, is_sample
        from sv_dagster.core.data.synthetic.sampling import resolve_models

        # A bad config fails here, before any work: unknown or embedded seed models, bad temperatures.
        seed_models = resolve_models(config.seed_models, models.specs(), config.temperatures)
        partition = context.partition_key
        upstream, consumed = _upstream(context, env, deps)
        held_out = _held_out_screen(context.instance, env)
        spec = BatchSpec(
            env=env.short,
            env_id=env.env_id,
            partition=partition,
            batch_id=context.run_id[:8],
            out_dir=outputs_root() / "datasets" / env.short / "synthetic" / f"{partition}_{context.run_id[:8]}",
            size=config.batch_size or _synthetic(env).batch_size,
            seed=derive_seed(config.seed, env.short, partition),
            sample=is_sample(_synthetic(env), upstream),
            spot_fraction=config.spot_check_fraction,
            seed_models=tuple(seed_models),
            temperatures=tuple(config.temperatures) if seed_models else (),
            variations=config.variations_per_model,
            held_out=held_out,
        )
        result = build_batch(
            spec, upstream, {option.name: getattr(config, option.name) for option in _synthetic(env).options}
        )
        meta = result.metadata
        n_seed = meta["rejected"]["by_stage"].get("seed", 0)
        if n_seed:  # bad input rows: counted, and the first ones named with their file and line
            shown = [f"{r.get('source')}: {r['reason']}" for r in meta["rejected"]["first"] if r["stage"] == "seed"][:3]
            context.log.warning(
                f"synthetic/{env.short}: {n_seed} seed row(s) unusable (all in rejects.jsonl), e.g. " + "; ".join(shown)
            )
        if spec.sample:
            context.log.info(
                f"synthetic/{env.short} is SAMPLE data (project-written templates/seeds), not a real corpus"
            )
        context.log.info(
            f"synthetic/{env.short} {partition}: {meta['counts']['accepted']} accepted, "
            f"{meta['counts']['rejected']} rejected, {meta['spot_check']['rows']} queued for review"
        )
        return Artifact(
            path=result.out_dir,
            config={**config.model_dump(), "env": env.env_id, "partition": partition},
            seed=spec.seed,
            packages=(env.env_id,),
            facts={
                "sample": spec.sample,
                "synthetic": True,
                "partition": partition,
                "batch_id": spec.batch_id,
                "generator": meta["generator"],
                "verifier": meta["verifier"],
                "seed_inputs": consumed,
                "seed_models": meta["seed_models"],
            },
            metadata={
                "sample": spec.sample,
                "accepted": meta["counts"]["accepted"],
                "rejected": meta["counts"]["rejected"],
                "label_balance": dg.MetadataValue.json(meta["label_balance"]),
                "difficulty": dg.MetadataValue.json(meta["difficulty"]),
                "rejected_by_reason": dg.MetadataValue.json(meta["rejected"]["by_reason"]),
                "review_rows": meta["spot_check"]["rows"],
                "review_queue": dg.MetadataValue.path(str(result.out_dir / "spot_check.jsonl")),
                "review_command": dg.MetadataValue.text(meta["review"]["command"]),
                "timings_s": dg.MetadataValue.json({k: round(v, 3) for k, v in result.timings.items()}),
            },
            files={name: path for name, path in result.files.items()},
        )

    return synthetic_batch


def build_spot_check(env: EnvSpec) -> dg.AssetChecksDefinition:
    with warnings.catch_warnings():
        # Partitioned asset checks are a preview API in the pinned dagster 1.13; the
        # definitions snapshot and the synthetic pipeline test catch a behaviour change.
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return _spot_check(env)


def _spot_check(env: EnvSpec) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=dg.AssetKey(["synthetic", env.short]),
        name=CHECK_NAME,
        blocking=False,  # the job never waits for a human
        partitions_def=SYNTHETIC_PARTITIONS,
        description="Human spot-check of the partition's batch: fails (WARN) until a reviewer records a decision "
        "with `sv-dagster review synthetic ...`; a batch rejected as a whole fails with ERROR.",
    )
    def spot_check(
        context,
    ) -> dg.AssetCheckResult:  # AssetCheckExecutionContext (unannotated: string annotations are not resolved)
        try:
            batch_dir, _ = latest_batch(context.instance, env.short, context.partition_key)
        except ReviewError as exc:  # run from the UI on a day with no batch: nothing to review
            return dg.AssetCheckResult(passed=False, severity=dg.AssetCheckSeverity.WARN, description=str(exc))
        passed, severity, description, metadata = check_outcome(batch_dir)
        return dg.AssetCheckResult(passed=passed, severity=severity, description=description, metadata=metadata)

    return spot_check


LEAKAGE_CHECK = "no_test_leakage"


def held_out_datasets(instance: dg.DagsterInstance, env: EnvSpec) -> tuple[dict[str, Any] | None, list[tuple]]:
    """The files of the latest `dataset/<env>` (None: never materialized) and of each
    attack/defense counterpart's latest dataset, as (EnvSpec, files) pairs."""
    from sv_dagster.core.data.leakage import counterparts_of, dataset_files

    def files_of(short: str) -> dict[str, Any] | None:
        folder = record_path(latest_record(instance, dg.AssetKey(["dataset", short])))
        return dataset_files(folder) if folder is not None and (folder / "metadata.json").is_file() else None

    others = [(other, files_of(other.short)) for other in counterparts_of(env, ENVS.values())]
    return files_of(env.short), [(other, files) for other, files in others if files is not None]


def _held_out_screen(instance: dg.DagsterInstance, env: EnvSpec):
    """The generator's screen against the latest dev/test rows (None: no dataset yet; the
    leakage check then warns)."""
    from sv_dagster.core.data import leakage

    own, counterparts = held_out_datasets(instance, env)
    if own is None:
        return None
    try:
        policy = leakage.policy_for(env.short)
    except leakage.LeakageConfigError as exc:
        raise dg.Failure(str(exc)) from exc
    reference = leakage.env_reference_rows(env, own, counterparts)
    return leakage.held_out_screen(reference, leakage.canonical_fn(env), policy)


def build_leakage_check(env: EnvSpec) -> dg.AssetChecksDefinition:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.PreviewWarning)  # partitioned asset checks, as for spot_check

        @dg.asset_check(
            asset=dg.AssetKey(["synthetic", env.short]),
            name=LEAKAGE_CHECK,
            blocking=True,
            partitions_def=SYNTHETIC_PARTITIONS,
            description=f"No synthetic row may duplicate or nearly duplicate a dev/test row of dataset/{env.short} "
            "(or a test row of its attack/defense counterpart): exact normalised-text hash and MinHash LSH over the "
            "environment's canonical text; fails (ERROR) when the batch's leak rate exceeds max_leak_rate "
            "(configs/leakage.yaml). The generator already rejects such candidates (stage leakage) when the dataset "
            "exists; this re-screens the written batch against the latest one. sft_data drops leaking rows in any case.",
        )
        def no_test_leakage(context) -> dg.AssetCheckResult:  # unannotated, as spot_check
            from sv_dagster.core.data.leakage import LeakageConfigError, batch_verdict, policy_for
            from sv_dagster.core.data.synthetic.review import reviews_dir
            from sv_dagster.training.sft_data import screen_leakage

            try:
                policy = policy_for(env.short)
            except LeakageConfigError as exc:
                raise dg.Failure(str(exc)) from exc
            batch_dir, _ = latest_batch(context.instance, env.short, context.partition_key)
            own, counterparts = held_out_datasets(context.instance, env)
            if own is None:
                return dg.AssetCheckResult(
                    passed=False,
                    severity=dg.AssetCheckSeverity.WARN,
                    description=f"dataset/{env.short} was never materialized: no dev/test rows to compare against",
                )
            # Beside the review decisions, outside the batch folder whose hash was recorded.
            report_path = reviews_dir(env.short, context.partition_key) / f"leakage-{batch_dir.name}.json"
            report = screen_leakage(env, [batch_dir / "examples.jsonl"], own, counterparts, report_path, policy)
            passed, description = batch_verdict(report, policy)
            return dg.AssetCheckResult(
                passed=passed,
                severity=dg.AssetCheckSeverity.ERROR,
                description=description,
                metadata={
                    **report.counts(),
                    "max_leak_rate": policy.max_leak_rate,
                    "seconds": round(report.seconds, 3),
                    "report": dg.MetadataValue.path(str(report_path)),
                    "first_leaks": dg.MetadataValue.json(report.first()),
                },
            )

    return no_test_leakage


def build_synthetic_assets(
    failure_keys: list[dg.AssetKey],
) -> tuple[list[dg.AssetsDefinition], list[dg.AssetChecksDefinition]]:
    """synthetic/<env> and its spot check for every environment that makes synthetic data;
    `failure_keys` are the assets defender failures may be read from (evals and
    tournaments): each environment's spec picks its own among them."""
    return (
        [build_synthetic_asset(env, failure_keys) for env in SYNTHETIC_ENVS],
        [*(build_spot_check(env) for env in SYNTHETIC_ENVS), *(build_leakage_check(env) for env in SYNTHETIC_ENVS)],
    )


def synthetic_keys() -> list[dg.AssetKey]:
    return [dg.AssetKey(["synthetic", env.short]) for env in SYNTHETIC_ENVS]
