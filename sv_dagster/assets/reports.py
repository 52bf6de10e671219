"""reports/weekly, reports/monthly, reports/scoreboard: built from the eval materializations
recorded in the instance, so each number traces to an eval table (and the report's own
provenance lists the eval data versions it read)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import dagster as dg
from pydantic import Field

from sv_dagster.assets.common import write_json
from sv_dagster.assets.recipe import Artifact, provenance_asset
from sv_dagster.assets.study import study_keys
from sv_dagster.assets.tournament import tournament_keys
from sv_dagster.core.artifacts.paths import outputs_root
from sv_dagster.core.artifacts.redaction import write_redacted
from sv_dagster.core.envs import ENVS
from sv_dagster.core.reporting.reports import (
    ABLATION_RECORD,
    CHECKPOINT_RECORD,
    EvalRecord,
    TournamentRecord,
    TrainingRecord,
    load_record,
    monthly_report,
    scoreboard,
    scoreboard_markdown,
    weekly_markdown,
)
from sv_dagster.instance import local_artifact_path
from sv_dagster.instance.synthetic import record_version


class MonthlyConfig(dg.Config):
    month: str | None = Field(default=None, description="YYYY-MM; default: the current month to date.")


def _metadata(record: dg.EventLogRecord) -> Mapping[str, Any]:
    materialization = record.asset_materialization
    assert materialization is not None  # fetch_materializations returns materializations
    return materialization.metadata


def eval_records(
    instance: dg.DagsterInstance, keys: list[dg.AssetKey], *, after: float | None = None, per_asset: int = 2
) -> list[EvalRecord]:
    """The newest `per_asset` eval materializations of each key (after a time, if given)."""
    records = []
    for key in keys:
        result = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=key, after_timestamp=after), limit=per_asset
        )
        for record in result.records:
            metadata = _metadata(record)
            run_dir = local_artifact_path(metadata)  # fetched from the artifact store if it is not here
            if not (run_dir / "summary.json").exists():
                continue  # outputs cleaned since: the event log still has the numbers' lineage
            records.append(
                load_record(
                    env=key.path[1],
                    model=key.path[2],
                    run_dir=run_dir,
                    timestamp=record.timestamp,
                    data_version=record_version(record) or "",
                    run_id=record.run_id,
                )
            )
    return records


def _latest_and_previous(records: list[EvalRecord]) -> tuple[list[EvalRecord], dict[tuple[str, str], EvalRecord]]:
    """The latest eval of each (env, model) in distribution and out of it (two series that
    never stand in for each other), and the previous in-distribution one behind each delta."""
    by_key: dict[tuple[str, str, bool], list[EvalRecord]] = defaultdict(list)
    for record in records:
        by_key[(record.env, record.model, record.is_ood)].append(record)
    latest, previous = [], {}
    for (env, model, ood), items in by_key.items():
        items.sort(key=lambda r: r.timestamp, reverse=True)
        latest.append(items[0])
        if len(items) > 1 and not ood:
            previous[(env, model)] = items[1]
    return latest, previous


def _eval_name(record: EvalRecord) -> str:
    return f"{record.env}/{record.model}" + (f" [{record.split}]" if record.is_ood else "")


def _eval_versions(records: list[EvalRecord]) -> dict[str, str]:
    """The data version of each eval a report read, OOD ones named apart."""
    return {_eval_name(r): r.data_version for r in records}


def training_records(
    instance: dg.DagsterInstance, keys: list[dg.AssetKey], start: float, end: float
) -> tuple[list[TrainingRecord], dict[str, str]]:
    """Each training materialization of the month (stages, ablations) with the run and data
    version that made it and the JSON in its folder its compute is read from; and, for those
    fetched from the artifact store, the path each recorded -> its path here."""
    out, moved = [], {}
    for key in keys:
        for record in instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=key, after_timestamp=start, before_timestamp=end), limit=500
        ).records:
            metadata = _metadata(record)

            def value(name: str, metadata: Mapping[str, Any] = metadata) -> Any:
                return metadata[name].value if name in metadata else None

            if value("cpu_hours") is None or value("artifact_path") is None:
                continue
            # Fetched from the artifact store if it is not here: the audit hashes the folder.
            path = str(local_artifact_path(metadata))
            if path != str(value("artifact_path")):
                moved[str(value("artifact_path"))] = path
            out.append(
                TrainingRecord(
                    asset=key.to_user_string(),
                    model=str(value("base_model") or "model"),
                    env=str(value("env") or key.path[1]),
                    wall_seconds=float(value("wall_seconds") or 0.0),
                    cpu_hours=float(value("cpu_hours") or 0.0),
                    gpu_hours=float(value("gpu_hours") or 0.0),
                    path=path,
                    timestamp=record.timestamp,
                    run_id=record.run_id,
                    data_version=record_version(record) or "",
                    record_file=ABLATION_RECORD if key.path[0] == "ablation" else CHECKPOINT_RECORD,
                )
            )
    return out, moved


def promoted_checkpoints(instance: dg.DagsterInstance, keys: list[dg.AssetKey]) -> dict[str, str]:
    """Environment -> the checkpoint path its newest promotion names."""
    out = {}
    for key in keys:
        entry = instance.get_latest_materialization_event(key)
        metadata = entry.asset_materialization.metadata if entry and entry.asset_materialization else {}
        if "checkpoint_path" in metadata:
            out[key.path[1]] = str(metadata["checkpoint_path"].value)
    return out


def synthetic_volumes(instance: dg.DagsterInstance, since: float) -> dict[str, int]:
    """Accepted synthetic rows per environment materialized since `since` (all partitions)."""
    volumes = {}
    for env in ENVS:
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey(["synthetic", env]), after_timestamp=since), limit=1000
        ).records
        accepted = [_metadata(r).get("accepted") for r in records]
        if records:
            volumes[env] = sum(int(value.value) for value in accepted if value is not None)
    return volumes


def build_report_assets(
    eval_keys: list[dg.AssetKey],
    training_keys: Sequence[dg.AssetKey] = (),
    optional_eval_keys: Sequence[dg.AssetKey] = (),
    promoted_keys: Sequence[dg.AssetKey] = (),
) -> list[dg.AssetsDefinition]:
    """`optional_eval_keys`: evals that may make nothing in a run (a trained checkpoint not
    promoted yet). Reports read them from the instance like the others but do not depend on
    them, so a skipped one never skips a report; their data versions are in the facts.
    `promoted_keys` (checkpoint/<env>/promoted) are read the same way: the monthly report
    shows each environment's promoted checkpoint as its current one."""
    deps = list(eval_keys)
    read = [*deps, *optional_eval_keys]

    @provenance_asset(
        key=["reports", "weekly"],
        deps=deps,
        group_name="reports",
        kinds={"markdown"},
        description="Weekly report: reward deltas with CIs against each model's previous eval, "
        "out-of-distribution figures beside the test split's, regressions against the baselines, synthetic data "
        "volumes, open risks.",
    )
    def weekly_report(context: dg.AssetExecutionContext) -> Artifact:
        from sv_dagster.core.evals.gate import regression_gate

        latest, previous = _latest_and_previous(eval_records(context.instance, read))
        # Baselines are of the test split: an OOD eval is never gated against one.
        gates = {
            (r.env, r.model): regression_gate(r.run_dir, outputs_root()).metadata() for r in latest if not r.is_ood
        }
        year, week, _ = datetime.now(UTC).isocalendar()
        out = outputs_root() / "reports" / "weekly"
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"{year}-W{week:02d}.md"
        volumes = synthetic_volumes(context.instance, (datetime.now(UTC) - timedelta(days=7)).timestamp())
        write_redacted(path, weekly_markdown(f"{year}-W{week:02d}", latest, previous, gates, out, volumes))
        context.log.info(f"weekly report: {path}")
        return Artifact(
            path=path,
            config={"week": f"{year}-W{week:02d}"},
            facts={"evals": _eval_versions(latest), "synthetic_volumes": volumes},
            metadata={"n_evals": len(latest), "report": dg.MetadataValue.md(path.read_text()[:8000])},
            files={"markdown": path},
        )

    @provenance_asset(
        key=["reports", "scoreboard"],
        deps=deps,
        group_name="reports",
        kinds={"json", "markdown"},
        description="Per-environment scoreboard (latest eval per model, best mean reward first among evals on the same "
        "examples; out-of-distribution evals ranked in tables of their own, after), JSON and Markdown.",
    )
    def scoreboard_report(context: dg.AssetExecutionContext) -> Artifact:
        latest, _ = _latest_and_previous(eval_records(context.instance, read, per_asset=1))
        out = outputs_root() / "reports" / "scoreboard"
        out.mkdir(parents=True, exist_ok=True)
        by_env: dict[str, list[EvalRecord]] = defaultdict(list)
        for record in latest:
            by_env[record.env].append(record)
        files = {}
        for env, records in by_env.items():
            files[f"{env}_json"] = write_json(out / f"{env}.json", {"env": env, "rows": scoreboard(records)})
            files[f"{env}_md"] = out / f"{env}.md"
            write_redacted(files[f"{env}_md"], scoreboard_markdown(env, records, out))
        return Artifact(
            path=out,
            config={"envs": sorted(by_env)},
            facts={"evals": _eval_versions(latest)},
            metadata={env: dg.MetadataValue.md(files[f"{env}_md"].read_text()) for env in by_env},
            files=files,
        )

    @provenance_asset(
        key=["reports", "monthly"],
        deps=[*deps, *tournament_keys(), *training_keys],
        group_name="reports",
        kinds={"html", "markdown"},
        description="Monthly consolidated report (Markdown and HTML with PNG plots: reliability diagrams, "
        "reward trends per model and env, cost per model, attacker success curves, training compute per model and "
        "env) over the month's eval, tournament and training materializations, and an out-of-distribution "
        "section (OOD figures beside the test split's).",
    )
    def monthly(context: dg.AssetExecutionContext, config: MonthlyConfig) -> Artifact:
        month = config.month or f"{datetime.now(UTC):%Y-%m}"
        start = datetime.strptime(month + "-01", "%Y-%m-%d").replace(tzinfo=UTC)
        end = (start + timedelta(days=32)).replace(day=1)
        records = [
            r
            for r in eval_records(context.instance, read, after=start.timestamp(), per_asset=500)
            if r.timestamp < end.timestamp()
        ]
        tournaments = [
            TournamentRecord(
                record.timestamp,
                local_artifact_path(record.asset_materialization.metadata),
                record.run_id,
                record_version(record) or "",
            )
            for key in tournament_keys()
            for record in context.instance.fetch_materializations(
                dg.AssetRecordsFilter(
                    asset_key=key, after_timestamp=start.timestamp(), before_timestamp=end.timestamp()
                ),
                limit=100,
            ).records
        ]
        found, moved = training_records(context.instance, list(training_keys), start.timestamp(), end.timestamp())
        # Rows cite the JSON each run wrote; a run whose folder was cleaned since has nothing to cite.
        training = [r for r in found if r.source.is_file()]
        gone = sorted(str(r.source) for r in found if not r.source.is_file())
        if gone:
            context.log.warning(f"{len(gone)} training run(s) left out, their records gone: {', '.join(gone[:5])}")
        promoted = {
            env: moved.get(path, path)
            for env, path in promoted_checkpoints(context.instance, list(promoted_keys)).items()
        }
        studies = [
            local_artifact_path(found[0].asset_materialization.metadata)
            for key in study_keys().values()
            if (
                found := context.instance.fetch_materializations(
                    dg.AssetRecordsFilter(
                        asset_key=key, after_timestamp=start.timestamp(), before_timestamp=end.timestamp()
                    ),
                    limit=1,
                    ascending=False,
                ).records
            )
        ]
        files = monthly_report(
            month,
            records,
            outputs_root() / "reports" / "monthly" / month,
            tournaments,
            training,
            promoted,
            [folder for folder in studies if (folder / "study.json").is_file()],
        )
        context.log.info(f"monthly report for {month}: {files['markdown']} and {files['html']}")
        return Artifact(
            path=files["markdown"].parent,
            config={"month": month},
            facts={
                "n_evals": len(records),
                "evals": sorted({_eval_name(r) for r in records}),
                "n_tournaments": len(tournaments),
                "training_runs": len(training),
                "training_records_gone": gone,
                "cpu_hours": sum(r.cpu_hours for r in training),
                "gpu_hours": sum(r.gpu_hours for r in training),
                "promoted_checkpoints": promoted,
            },
            metadata={"n_evals": len(records), "html": dg.MetadataValue.path(str(files["html"]))},
            files=files,
        )

    return [weekly_report, scoreboard_report, monthly]
