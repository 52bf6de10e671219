"""dataset/<env>: each environment's corpora normalised to its schema, de-duplicated, split by
stable hashes and validated (a blocking Great Expectations check on every corpus and dataset;
see `sv_dagster.assets.data_checks`)."""

from __future__ import annotations

import time

import dagster as dg
from pydantic import Field

from sv_dagster.assets.common import LONG_WORK_ROWS, artifact_dir, write_json
from sv_dagster.assets.corpora import build_corpus_assets
from sv_dagster.assets.data_checks import build_corpus_check, build_dataset_check
from sv_dagster.assets.recipe import Artifact, provenance_asset
from sv_dagster.core.data.corpora import SourceSpec, load_sources, sources_for
from sv_dagster.core.data.corpora.build import (
    CorpusInput,
    DatasetConfigError,
    NoUsableRowsError,
    build_dataset,
    build_user_dataset,
    check_config,
    read_corpus_rows,
)
from sv_dagster.core.data.user_dataset import UserDatasetError, usable_user_rows
from sv_dagster.core.envs import EnvSpec


class DatasetConfig(dg.Config):
    dev_frac: float = Field(default=0.1, ge=0.0, le=0.5, description="Share of corpus rows in dev (hash bucket).")
    test_frac: float = Field(default=0.2, ge=0.0, le=0.5, description="Share of corpus rows in the test bucket.")
    test_source: str | None = Field(
        default=None,
        description='"corpora" (the test bucket of the corpus rows) or "bundled" (the environment package\'s task '
        "set; corpus rows in the test bucket become corpus_test). Default: the environment's own (the first of "
        "its `test_sources`).",
    )
    user_file: str | None = Field(
        default=None,
        description="A user's JSONL file (`sv-dagster eval eN --dataset FILE`): the dataset is then its usable rows "
        "as the `test` split and nothing else (no corpus rows); each line is the environment's own row or the "
        "common {question, answer, meta|info}. Its path and sha256 are recorded, so a changed file is a new "
        "data version.",
    )


_TEST_SPLIT = {
    "corpora": "test = the corpus rows in the test hash bucket",
    "bundled": "test = the environment package's bundled task set (what the demo, vf-eval and the regression "
    "baselines score); corpus rows fill train/dev, and those in the test bucket are `corpus_test`",
}


def build_dataset_asset(env: EnvSpec, sources: list[SourceSpec]) -> dg.AssetsDefinition:
    ins = {spec.id: dg.AssetIn(key=["corpus", spec.id]) for spec in sources}
    ood = [spec.id for spec in sources if spec.ood]
    corpus_spec = env.corpora
    assert corpus_spec is not None  # only environments with corpora get a dataset asset

    @provenance_asset(
        key=["dataset", env.short],
        ins=ins,
        group_name="datasets",
        kinds={"json"},
        description=f"{env.env_id}: {', '.join(spec.id for spec in sources)} normalised to the environment's schema, "
        "de-duplicated (content hash and normalised text), split by stable hash "
        f"({_TEST_SPLIT[corpus_spec.test_sources[0]]})"
        + (f"; {', '.join(ood)} kept apart as the `ood` split" if ood else "")
        + "."
        + (f" {corpus_spec.note}" if corpus_spec.note else "")
        + " Rows are labelled sample: true when any input is a sample.",
    )
    def dataset(context: dg.AssetExecutionContext, config: DatasetConfig, **corpora: Artifact) -> Artifact:
        if config.user_file:
            return _user_dataset(context, env, config.user_file)
        try:  # a bad config fails before any work
            test_source = check_config(
                env.short, dev_frac=config.dev_frac, test_frac=config.test_frac, test_source=config.test_source
            )
        except DatasetConfigError as exc:
            raise dg.Failure(description=str(exc)) from exc
        inputs = [
            CorpusInput(
                spec, read_corpus_rows(spec, corpora[spec.id].files["rows"]), bool(corpora[spec.id].facts.get("sample"))
            )
            for spec in sources
        ]
        out = artifact_dir(context, "datasets", env.short)
        n_rows, started = sum(len(i.frame) for i in inputs), time.perf_counter()
        if n_rows >= LONG_WORK_ROWS:
            context.log.info(f"dataset/{env.short}: curating {n_rows:,} corpus rows from {len(inputs)} corpora")
        try:
            build = build_dataset(
                env.short,
                inputs,
                out,
                dev_frac=config.dev_frac,
                test_frac=config.test_frac,
                test_source=test_source,
            )
        except NoUsableRowsError as exc:
            raise dg.Failure(description=str(exc)) from exc
        write_json(out / "metadata.json", build.report)
        if n_rows >= LONG_WORK_ROWS:
            context.log.info(
                f"dataset/{env.short}: curated in {time.perf_counter() - started:.1f} s, "
                f"splits {build.report['split_sizes']}"
            )
        for reject in build.rejects[:20]:
            context.log.warning(
                f"dataset/{env.short}: {reject['source']} row {reject['ref']} left out: {reject['reason']}"
            )
        if len(build.rejects) > 20:
            context.log.warning(f"dataset/{env.short}: {len(build.rejects)} rows left out in all (rejects.jsonl)")
        report = build.report
        return Artifact(
            path=out,
            config={**config.model_dump(), "test_source": test_source, "env": env.env_id},
            packages=(env.env_id,),
            facts={"sample": report["sample"], "test_source": test_source, "sample_inputs": report["sample_inputs"]},
            metadata={
                "sample": report["sample"],
                "sample_inputs": report["sample_inputs"],
                "test_source": test_source,
                "split_sizes": report["split_sizes"],
                "n_corpus_rows": report["n_corpus_rows"],
                "n_duplicates_dropped": report["n_duplicates_dropped"],
                "n_duplicates_of_test_dropped": report["n_duplicates_of_test_dropped"],
                "n_rejected": report["n_rejected"],
                "n_filtered_by_design": report["n_filtered_by_design"],
                "kept_by_source": report["kept_by_source"],
                "label_counts": report["label_counts"],
                "label_balance": dg.MetadataValue.md(build.balance_markdown),
            },
            files={**build.files, "metadata": out / "metadata.json"},
        )

    return dataset


def _user_dataset(context: dg.AssetExecutionContext, env: EnvSpec, user_file: str) -> Artifact:
    """dataset/<env> from a user's file: its usable rows are the test split."""
    try:
        user = usable_user_rows(env.short, user_file)
    except UserDatasetError as exc:
        raise dg.Failure(description=str(exc)) from None
    for line in user.reject_lines():
        context.log.warning(f"dataset/{env.short}: left out {line}")
    out = artifact_dir(context, "datasets", env.short)
    build = build_user_dataset(env.short, user, out)
    write_json(out / "metadata.json", build.report)
    described = user.describe()
    return Artifact(
        path=out,
        # The file's hash is config: the same path with other bytes is another dataset.
        config={"user_file": described["path"], "user_file_sha256": described["sha256"], "env": env.env_id},
        packages=(env.env_id,),
        facts={"sample": False, "test_source": "user_file", "user_file": described},
        metadata={
            "sample": False,
            "test_source": "user_file",
            "user_file": described["path"],
            "user_file_sha256": described["sha256"],
            "split_sizes": build.report["split_sizes"],
            "n_rejected": len(user.rejects),
            "rejected_lines": dg.MetadataValue.md(
                "\n".join(f"- `{line}`" for line in user.reject_lines()[:50]) or "none"
            ),
            "label_counts": build.report["label_counts"],
            "label_balance": dg.MetadataValue.md(build.balance_markdown),
        },
        files={**build.files, "metadata": out / "metadata.json"},
    )


def build_data_assets(envs: list[EnvSpec]) -> tuple[list[dg.AssetsDefinition], list[dg.AssetChecksDefinition]]:
    """Every corpus of the registry, each environment's dataset, and their blocking checks."""
    sources = load_sources()
    assets: list[dg.AssetsDefinition] = build_corpus_assets(sources)
    checks = [build_corpus_check(spec) for spec in sources.values()]
    for env in envs:
        if env.corpora is None:
            continue  # it reads no corpora: no dataset
        assets.append(build_dataset_asset(env, sources_for(env.short, sources)))
        checks.append(build_dataset_check(env))
    return assets, checks
