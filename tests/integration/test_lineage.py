"""Lineage audit read from the instance's event log: E1's eval back to the corpus, the
dataset materialization the eval consumed (not merely the newest), unknown and
never-materialized keys, JSON, and the monthly report's reach to the corpora."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest

from sv_dagster.assembly import build_definitions
from sv_dagster.instance.lineage import (
    LineageError,
    UnknownAssetKeyError,
    format_lineage,
    lineage,
    lineage_from_json,
    lineage_json,
    main_lineage,
)
from tests.integration.test_e1_pipeline import E1_CORPORA, E1_PATH, latest, materialize


def data_version(entry: dg.EventLogEntry) -> str:
    return entry.tags["dagster/data_version"]


def only(node, key: str):
    (found,) = node.find(key)
    return found


@pytest.fixture
def e1(isolated: Path):
    instance = dg.DagsterInstance.get()
    defs = build_definitions()
    result = materialize(defs, E1_PATH, instance)
    assert result.success
    return instance, defs, result.run_id


def test_eval_lineage_reaches_dataset_and_corpus_with_recorded_versions(e1, capsys):
    instance, defs, run_id = e1
    node = lineage(instance, defs, "eval/e1/heuristic")
    assert [n.key for n in node.walk()] == ["eval/e1/heuristic", "dataset/e1", *sorted(E1_CORPORA)]
    for n in node.walk():
        entry = latest(instance, n.key)
        assert n.materialized and n.run_id == run_id == entry.run_id
        assert n.data_version == data_version(entry) == n.content_hash
        metadata = entry.asset_materialization.metadata
        assert n.git_commit == metadata["git_commit"].value and n.git_dirty == metadata["git_dirty"].value
        assert n.config_hash == metadata["config_hash"].value and len(n.config_hash) == 64
        assert n.code_version is None  # no asset declares one; Dagster's run-id default is not shown
        assert n.timestamp == pytest.approx(entry.timestamp)
    assert node.matched is None and node.seed == 42
    assert node.details["model_id"] == "rules-v1" and node.details["backend"] == "heuristic"
    dataset, corpus = only(node, "dataset/e1"), only(node, "corpus/iot23")
    assert node.input_data_versions == {"dataset/e1": dataset.data_version}
    assert dataset.input_data_versions == {key: only(node, key).data_version for key in E1_CORPORA}
    assert corpus.data_version == dataset.input_data_versions["corpus/iot23"]
    assert dataset.matched and all(only(node, key).matched and only(node, key).parents == [] for key in E1_CORPORA)
    assert dataset.expected_data_version == dataset.data_version

    text = format_lineage(node)
    lines = text.splitlines()
    assert len(lines) == 5
    assert lines[0].startswith(f"eval/e1/heuristic  data_version={node.data_version[:12]}")
    assert lines[1].startswith("└─ dataset/e1") and lines[2].startswith("   ├─ corpus/cicids2017")
    assert lines[3].startswith("   ├─ corpus/iot23") and lines[4].startswith("   └─ corpus/unsw_nb15")
    assert f"git={node.git_commit[:7]}" in lines[0] and f"run={run_id[:8]}" in lines[0]
    assert "model=rules-v1(heuristic)" in lines[0]

    # JSON round-trips, through the CLI entry point too
    data = lineage_json(node)
    assert lineage_from_json(json.loads(json.dumps(data))) == node
    capsys.readouterr()
    assert main_lineage("eval/e1/heuristic", None, True, build_definitions=build_definitions) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(json.dumps(data))
    assert [p["key"] for p in printed["parents"][0]["parents"]] == sorted(E1_CORPORA)
    assert main_lineage("eval/e1/heuristic", None, False, build_definitions=build_definitions) == 0
    assert capsys.readouterr().out.strip() == text


def test_eval_lineage_keeps_the_dataset_it_consumed_after_rematerialization(e1):
    instance, defs, first_run = e1
    consumed = latest(instance, "dataset/e1")
    consumed_id = instance.fetch_materializations(dg.AssetKey(["dataset", "e1"]), limit=1).records[0].storage_id

    # Same inputs, same content: same data version. The lineage must still name the
    # materialization the eval read (Dagster's input pointer), not the newer twin.
    same = materialize(defs, ["dataset/e1"], instance)
    assert same.success and data_version(latest(instance, "dataset/e1")) == data_version(consumed)
    node = only(lineage(instance, defs, "eval/e1/heuristic"), "dataset/e1")
    assert node.matched and node.match == "event_pointer"
    assert node.run_id == first_run != same.run_id and node.storage_id == consumed_id

    # Different split: new content, new data version; the eval still points at the old one.
    config = {"ops": {"dataset__e1": {"config": {"test_frac": 0.3}}}}
    changed = materialize(defs, ["dataset/e1"], instance, run_config=config)
    assert changed.success
    newest = latest(instance, "dataset/e1")
    assert data_version(newest) != data_version(consumed)
    tree = lineage(instance, defs, "eval/e1/heuristic")
    node = only(tree, "dataset/e1")
    assert node.matched and node.data_version == data_version(consumed) and node.run_id == first_run
    assert only(tree, "corpus/iot23").data_version == data_version(latest(instance, "corpus/iot23"))
    # ...while the dataset's own lineage starts at its newest materialization
    assert lineage(instance, defs, "dataset/e1").run_id == changed.run_id

    # An eval that recorded a dataset version the instance no longer has: the latest is
    # shown, marked unmatched, and the text says so.
    instance.report_runless_asset_event(
        dg.AssetMaterialization(
            asset_key=dg.AssetKey(["eval", "e1", "heuristic"]),
            metadata={"input_data_versions": dg.MetadataValue.json({"dataset/e1": "f" * 64}), "content_hash": "e" * 64},
            tags={"dagster/data_version": "e" * 64},
        )
    )
    tree = lineage(instance, defs, "eval/e1/heuristic")
    node = only(tree, "dataset/e1")
    assert tree.data_version == "e" * 64 and tree.git_commit is None
    assert node.matched is False and node.match == "fallback_latest" and node.run_id == changed.run_id
    assert node.expected_data_version == "f" * 64
    assert "UNMATCHED: child consumed ffffffffffff" in format_lineage(tree).splitlines()[1]


def test_unknown_and_never_materialized_keys_exit_2(isolated: Path, capsys):
    assert main_lineage("eval/e1/heuristc", None, False, build_definitions=build_definitions) == 2
    err = capsys.readouterr().err
    assert "unknown asset key 'eval/e1/heuristc'" in err and "eval/e1/heuristic" in err
    assert main_lineage("eval/e1", None, False, build_definitions=build_definitions) == 2
    err = capsys.readouterr().err
    assert "eval/e1/heuristic" in err and "eval/e1/gpt_5_mini" in err
    assert main_lineage("eval/e1/heuristic", None, True, build_definitions=build_definitions) == 2
    captured = capsys.readouterr()
    assert "'eval/e1/heuristic' has never been materialized" in captured.err and captured.out == ""
    assert main_lineage("eval/e1/heuristic", "2026-11-23", False, build_definitions=build_definitions) == 2
    assert "not partitioned" in capsys.readouterr().err

    defs = build_definitions()
    with pytest.raises(UnknownAssetKeyError) as raised:
        lineage(dg.DagsterInstance.get(), defs, "nope/nothing")
    assert isinstance(raised.value, LineageError) and "nope/nothing" in str(raised.value)
    node = lineage(dg.DagsterInstance.get(), defs.resolve_asset_graph(), "corpus/iot23")
    assert node.materialized is False and node.parents == []


def test_monthly_report_lineage_reaches_the_corpora(isolated: Path):
    instance = dg.DagsterInstance.get()
    defs = build_definitions()
    result = materialize(defs, [*E1_PATH, "reports/monthly"], instance)
    assert result.success
    tree = lineage(instance, defs, "reports/monthly")
    assert tree.materialized and tree.run_id == result.run_id
    parents = {node.key: node for node in tree.parents}
    assert "tournament/e5_e6" in parents and not parents.pop("tournament/e5_e6").materialized  # the curves' source
    # Training compute: every checkpoint stage and ablation (none trained in this instance).
    compute = {key: parents.pop(key) for key in list(parents) if key.startswith(("checkpoint/", "ablation/"))}
    assert "checkpoint/e1/rlft_stage1" in compute and not any(node.materialized for node in compute.values())
    evals = parents  # on the test split and, for E1, the OOD split (never run here)
    assert all(key.startswith(("eval/", "eval_ood/")) for key in evals) and len(evals) > 3
    assert "eval_ood/e1/heuristic" in evals and not evals["eval_ood/e1/heuristic"].materialized
    heuristic = evals.pop("eval/e1/heuristic")
    assert heuristic.materialized and heuristic.matched
    assert heuristic.data_version == data_version(latest(instance, "eval/e1/heuristic"))
    assert tree.input_data_versions["eval/e1/heuristic"] == heuristic.data_version
    assert not any(node.materialized for node in evals.values())  # the other evals never ran
    corpus = only(heuristic, "corpus/iot23")
    assert corpus.materialized and corpus.data_version == data_version(latest(instance, "corpus/iot23"))
    assert only(tree, "dataset/e1").data_version == data_version(latest(instance, "dataset/e1"))
    text = format_lineage(tree)
    assert "├─ corpus/iot23  data_version=" in text
    # Compact: each materialization once, the report's never-materialized inputs on one line.
    lines = text.splitlines()
    assert sum(line.endswith(corpus.time_iso) and "corpus/iot23  data_version=" in line for line in lines) == 1
    (folded,) = [line for line in lines if "NEVER MATERIALIZED" in line]
    assert (
        folded.startswith("└─ NEVER MATERIALIZED (") and "eval/e2/heuristic" in folded and "tournament/e5_e6" in folded
    )
    assert len(lines) == 1 + 1 + 1 + 1 + len(E1_CORPORA)  # report, eval, dataset, folded line, corpora
    assert lineage_from_json(json.loads(json.dumps(lineage_json(tree)))) == tree


def test_the_cli_subcommand_reaches_it(isolated, capsys):
    from sv_dagster.cli import main

    assert main(["lineage", "eval/e1/heuristc"]) == 2
    assert "did you mean: eval/e1/heuristic" in capsys.readouterr().err


def test_a_report_row_traces_to_the_eval_that_fed_it_after_the_eval_is_run_again(isolated: Path, capsys):
    """The scoreboard's row names its run; after a re-run on a new split, the row still
    traces to the old eval and the dataset version it consumed, and still audits clean."""
    from sv_dagster.cli import main
    from sv_dagster.core.reporting.audit import table_rows

    instance = dg.DagsterInstance.get()
    defs = build_definitions()
    first = materialize(defs, [*E1_PATH, "reports/scoreboard"], instance)
    assert first.success
    old_dataset = data_version(latest(instance, "dataset/e1"))
    old_eval = data_version(latest(instance, "eval/e1/heuristic"))
    report = isolated / "outputs" / "reports" / "scoreboard" / "e1.md"
    (row,) = [r for r in table_rows(report.read_text()) if r.table == "scoreboard"]
    assert row.cells["run"] == first.run_id[:8] and old_eval.startswith(row.cells["data version"])

    again = materialize(
        defs,
        ["dataset/e1", "eval/e1/heuristic"],
        instance,
        run_config={"ops": {"dataset__e1": {"config": {"test_frac": 0.3}}}},
    )
    assert again.success and data_version(latest(instance, "eval/e1/heuristic")) != old_eval

    assert main(["lineage", str(report), "--row", str(row.line), "--json"]) == 0
    tree = lineage_from_json(json.loads(capsys.readouterr().out))
    assert tree.key == "eval/e1/heuristic" and tree.run_id == first.run_id and tree.data_version == old_eval
    assert tree.match == "selected" and only(tree, "dataset/e1").data_version == old_dataset
    assert lineage(instance, defs, "eval/e1/heuristic", data_version=old_eval[:12]).run_id == first.run_id
    assert lineage(instance, defs, "eval/e1/heuristic").run_id == again.run_id

    assert main(["audit", str(report)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert (
        out[-1].startswith(f"OK: {report}: 1 sourced rows")
        and out[0] == f"  line {row.line:<4} e1 / heuristic (sample)  run {first.run_id[:8]}"
    )
    assert main(["lineage", "eval/e1/heuristic", "--run", "0000dead"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: no materialization of 'eval/e1/heuristic' has run 0000dead; its newest: run ")
    assert main(["lineage", str(report), "--row", "1"]) == 2
    assert "is not a sourced table row; rows at lines [" in capsys.readouterr().err
