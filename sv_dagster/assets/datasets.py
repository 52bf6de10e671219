"""dataset/<env>: curated, de-duplicated, split datasets in each environment's schema."""

from __future__ import annotations

import dagster as dg
import pandas as pd
from pydantic import Field

from sv_dagster.assets.common import artifact_dir, write_json
from sv_dagster.assets.recipe import Artifact, provenance_asset
from sv_dagster.core.e1_data import SPLITS, curate_e1, write_jsonl
from sv_dagster.core.envs import EnvSpec

class E1DatasetConfig(dg.Config):
    dev_frac: float = Field(default=0.1, ge=0.0, le=0.5)
    test_frac: float = Field(default=0.2, ge=0.0, le=0.5)

@provenance_asset(
    key=["dataset", "e1"],
    ins={"corpus": dg.AssetIn(key=["corpus", "iot23"])},
    group_name="datasets",
    kinds={"json"},
    description="E1 examples ({id, question, answer, info}) with stable hash-based train/dev/test splits.",
)
def dataset_e1(context: dg.AssetExecutionContext, config: E1DatasetConfig, corpus: Artifact) -> Artifact:
    sample = bool(corpus.facts.get("sample"))
    curated = curate_e1(pd.read_parquet(corpus.files["flows"]), sample=sample, dev_frac=config.dev_frac, test_frac=config.test_frac)
    out = artifact_dir(context, "datasets", "e1")
    files = {name: out / f"{name}.jsonl" for name in SPLITS}
    for name in SPLITS:
        write_jsonl(files[name], curated.splits[name])
    write_jsonl(out / "rejects.jsonl", curated.rejects)
    report = {
        "sample": sample,
        "corpus": corpus.facts.get("location"),
        "n_input": curated.n_input,
        "n_duplicates_dropped": curated.n_duplicates,
        "n_rejected": len(curated.rejects),
        "split_sizes": {name: len(rows) for name, rows in curated.splits.items()},
        "label_counts": curated.label_counts,
    }
    write_json(out / "metadata.json", report)
    for reject in curated.rejects[:20]:
        context.log.warning(f"dataset/e1 rejected corpus row {reject['row']}: {reject['reason']}")
    return Artifact(
        path=out,
        config=config.model_dump(),
        facts={"sample": sample},
        metadata={**report, "label_balance": dg.MetadataValue.md(_balance_table(curated.label_counts))},
        files={**files, "rejects": out / "rejects.jsonl"},
    )

def _balance_table(counts: dict[str, dict[str, int]]) -> str:
    labels = sorted({label for row in counts.values() for label in row})
    lines = ["| split | " + " | ".join(labels) + " |", "|---" * (len(labels) + 1) + "|"]
    lines += [f"| {split} | " + " | ".join(str(row.get(label, 0)) for label in labels) + " |" for split, row in counts.items()]
    return "\n".join(lines)


def build_bundled_dataset_asset(env: EnvSpec) -> dg.AssetsDefinition:
    """dataset/<env> for an environment that ships its own task set (E2's manifests and
    Terraform files, E3's vulnerable functions with tests): the package's JSONL, copied as
    the `test` split with its provenance. Curated corpora for these environments come
    with the data pipeline; the package's file is what `vf-eval` sees by default too."""

    @provenance_asset(
        key=["dataset", env.short],
        group_name="datasets",
        kinds={"json"},
        description=f"{env.env_id}: the task set bundled with the environment package (SAMPLE data the "
        "project wrote), as the `test` split.",
    )
    def bundled_dataset(context: dg.AssetExecutionContext) -> Artifact:
        out = artifact_dir(context, "datasets", env.short)
        target = out / "test.jsonl"
        facts = env.package.write_bundled_dataset(target)
        report = {"sample": True, "source": f"{env.env_id} (bundled)", "split_sizes": {"test": facts["n_examples"]}, **facts}
        write_json(out / "metadata.json", report)
        return Artifact(
            path=out,
            config={"env": env.env_id, "source": "bundled"},
            facts={"sample": True, "package": env.env_id},
            packages=(env.env_id,),
            metadata=report,
            files={"test": target},
        )

    return bundled_dataset
