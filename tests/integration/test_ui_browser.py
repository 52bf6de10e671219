"""The Dagster UI as a user sees it: E1's path and the monthly report are materialized into
a fresh instance, `dagster dev` serves it on loopback, headless Chromium (Debian's package)
opens the asset graph, the eval table's materialization history and its regression gate, one
environment's training group and a report row's lineage, and the webserver's GraphQL API is
asked for the lineage from the monthly report back to the corpora. Screenshots land under
the test's tmp_path and in `test-output/ui/` at the repo root."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import dagster as dg
import pytest

from sv_dagster.assembly import build_definitions
from tests.conftest import REPO_ROOT
from tests.integration.test_e1_pipeline import E1_CORPORA, E1_PATH, materialize
from tests.support.webserver import (
    BrowserUnavailable,
    chromium,
    dagster_dev,
    find_chromium,
    system_browser_missing_is_a_skip,
)

SCREENSHOTS = REPO_ROOT / "test-output" / "ui"
MONTHLY, EVAL, DATASET = "reports/monthly", "eval/e1/heuristic", "dataset/e1"

ASSET_QUERY = """
query Asset($key: AssetKeyInput!) { assetNodeOrError(assetKey: $key) { __typename ... on AssetNode {
    dependencyKeys { path }
    dataVersion
    assetMaterializations(limit: 1) {
        runId
        metadataEntries { label ... on JsonMetadataEntry { jsonString } }
    }
} } }
"""


@pytest.fixture
def browser_path() -> str:
    try:
        return find_chromium()
    except BrowserUnavailable as missing:
        if system_browser_missing_is_a_skip():
            pytest.skip(f"{missing} (this platform has no apt-get to install it)")
        raise  # on Debian a missing browser is a set-up bug, not a reason to skip


def asset_node(ui, key: str) -> dict:
    node = ui.graphql(ASSET_QUERY, {"key": {"path": key.split("/")}})["assetNodeOrError"]
    assert node["__typename"] == "AssetNode", (key, node)
    return node


def recorded_inputs(node: dict) -> dict[str, str]:
    """`input_data_versions` of the asset's latest materialization (our provenance)."""
    (materialization,) = node["assetMaterializations"]
    entries = {e["label"]: e for e in materialization["metadataEntries"]}
    return json.loads(entries["input_data_versions"]["jsonString"])


def materialized_lineage(ui, start: str) -> dict[str, list[str]]:
    """Upstream walk over materialized assets only: each reached key -> its path from `start`."""
    paths, frontier = {start: [start]}, [start]
    while frontier:
        key = frontier.pop()
        for dep in asset_node(ui, key)["dependencyKeys"]:
            parent = "/".join(dep["path"])
            if parent not in paths and asset_node(ui, parent)["assetMaterializations"]:
                paths[parent] = [*paths[key], parent]
                frontier.append(parent)
    return paths


def shoot(page, name: str, out_dir: Path) -> Path:
    path = out_dir / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)
    assert path.stat().st_size > 20_000, f"{path} is suspiciously small (blank page?)"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(path, SCREENSHOTS / path.name)
    return path


def dismiss_welcome(page) -> None:
    """A fresh instance greets the first visitor with a newsletter dialog; skip it as a user would."""
    skip = page.get_by_role("button", name="Skip")
    try:
        skip.wait_for(state="visible", timeout=8000)
    except Exception:
        return
    skip.click()


@pytest.mark.slow
def test_ui_shows_graph_eval_history_and_gate_and_graphql_lineage(isolated: Path, browser_path: str):
    instance = dg.DagsterInstance.get()
    result = materialize(build_definitions(), [*E1_PATH, MONTHLY], instance)
    assert result.success
    run8 = result.run_id[:8]
    # Metrics are keyed by the examples they were scored on, so one UI plot never mixes sets.
    entry = instance.get_latest_materialization_event(dg.AssetKey(["eval", "e1", "heuristic"]))
    examples = entry.asset_materialization.metadata["examples"].value
    assert examples.startswith("test n=") and "seed" not in examples  # the whole test split
    shots = isolated / "screenshots"
    shots.mkdir()

    with dagster_dev(isolated / "dagster_home", cwd=REPO_ROOT) as ui:
        # GraphQL: the upstream walk over materialized assets reaches E1's corpora through
        # the one eval that ran; each hop's recorded input is its parent's current data version.
        paths = materialized_lineage(ui, MONTHLY)
        assert {key for key in paths if key.startswith("corpus/")} == set(E1_CORPORA)
        for corpus in E1_CORPORA:
            assert paths[corpus] == [MONTHLY, EVAL, DATASET, corpus]
            assert not asset_node(ui, corpus)["dependencyKeys"]  # a root
        for child, parent in [(MONTHLY, EVAL), (EVAL, DATASET), *((DATASET, corpus) for corpus in E1_CORPORA)]:
            child_node, parent_node = asset_node(ui, child), asset_node(ui, parent)
            assert parent.split("/") in [d["path"] for d in child_node["dependencyKeys"]]
            assert child_node["assetMaterializations"][0]["runId"] == result.run_id
            assert recorded_inputs(child_node)[parent] == parent_node["dataVersion"], (child, parent)

        with chromium() as page:
            page.goto(f"{ui.url}/assets/{EVAL}?view=lineage&lineageScope=upstream&lineageDepth=2", wait_until="load")
            dismiss_welcome(page)
            for name in ("iot23", "e1", "heuristic"):  # node titles: the last part of each key
                page.get_by_text(name, exact=True).first.wait_for(timeout=30_000)
            for group in ("corpora", "datasets", "e1_evals"):
                page.get_by_text(group, exact=True).first.wait_for(timeout=10_000)
            page.get_by_text("Materialized").nth(2).wait_for(timeout=30_000)  # all three nodes' status loaded
            shoot(page, "01-asset-graph-eval-e1-upstream", shots)

            page.goto(f"{ui.url}/asset-groups", wait_until="load")
            for group in ("corpora", "datasets", "e1_evals", "e1_training", "reports", "tournaments"):
                page.get_by_text(group, exact=True).first.wait_for(timeout=30_000)
            page.get_by_text("fetching statuses").first.wait_for(state="hidden", timeout=30_000)
            shoot(page, "02-global-asset-lineage", shots)

            page.goto(f"{ui.url}/assets/{EVAL}?view=events", wait_until="load")
            page.get_by_text(f"Materialized in run {run8}").first.wait_for(timeout=30_000)
            for label in ("content_hash", "input_data_versions", "model_id", "examples", f"accuracy [{examples}]"):
                page.get_by_text(label, exact=True).first.wait_for(timeout=10_000)
            shoot(page, "03-eval-e1-heuristic-materializations", shots)

            page.goto(f"{ui.url}/assets/{EVAL}?view=checks", wait_until="load")
            page.get_by_text("regression_gate", exact=True).first.wait_for(timeout=30_000)
            page.get_by_text("This is a blocking asset check.").wait_for(timeout=10_000)
            # No baseline is recorded here: the gate's warning state, never a pass.
            page.get_by_text("Failed", exact=True).first.wait_for(timeout=10_000)
            page.get_by_text("NO BASELINE", exact=True).first.wait_for(timeout=10_000)
            page.get_by_text("eval_dir", exact=True).first.wait_for(timeout=10_000)
            shoot(page, "04-eval-e1-heuristic-regression-gate", shots)

            # One environment's training group: each node's label names its stage, once.
            page.goto(f"{ui.url}/locations/sv_dagster.definitions/asset-groups/e1_training", wait_until="load")
            for label in ("e1", "base", "sft", "rlft_stage1", "promoted"):  # e1: sft_data/e1
                page.get_by_text(label, exact=True).first.wait_for(timeout=30_000)
            shoot(page, "05-e1-training-group", shots)

            # A report row's lineage: the row's eval, the reports it feeds, its dataset and corpora.
            page.goto(f"{ui.url}/assets/{EVAL}?view=lineage&lineageScope=neighbors&lineageDepth=2", wait_until="load")
            for name in ("datasets", "e1_evals", "e1_rescores", "weekly", "scoreboard"):  # what the view centres on
                page.get_by_text(name, exact=True).first.wait_for(timeout=30_000)
            shoot(page, "06-eval-e1-heuristic-dataset-and-reports", shots)

    for shot in shots.iterdir():  # a person can look at them after `make test`
        assert (SCREENSHOTS / shot.name).read_bytes() == shot.read_bytes()
