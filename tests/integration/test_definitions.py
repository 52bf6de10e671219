"""The definitions snapshot (dagster-open-platform style): the asset graph, jobs and
schedules cannot change unnoticed. Update the expectations here on purpose."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from sv_dagster.assets.recipe import PROVENANCE_TAG, provenance_asset
from sv_dagster.definitions import build_definitions, require_provenance

MODEL_KEYS = [
    "heuristic", "gpt_5", "gpt_5_mini", "claude_sonnet_4_5", "qwen3_72b", "qwen3_235b_a22b",
    "llama_3_1_8b", "llama_3_70b", "mixtral_8x22b",
]
ENV_MODELS = {"e1": MODEL_KEYS, "e2": [*MODEL_KEYS, "tool_oracle"], "e3": [*MODEL_KEYS, "tool_oracle"], "e4": MODEL_KEYS,
              "e5": MODEL_KEYS, "e6": MODEL_KEYS}
ALL_EVALS = {f"eval/{env}/{m}" for env, models in ENV_MODELS.items() for m in models}
EXPECTED_DEPS = {
    "corpus/iot23": set(),
    "dataset/e1": {"corpus/iot23"},
    "dataset/e2": set(),  # the task set bundled with the environment package
    "dataset/e3": set(),
    "dataset/e4": set(),
    "dataset/e5": set(),
    "dataset/e6": set(),
    "tournament/e5_e6": {"dataset/e5", "dataset/e6"},
    **{f"{kind}/{env}/{m}": ({f"dataset/{env}"} if kind == "eval" else {f"eval/{env}/{m}"})
       for env, models in ENV_MODELS.items() for m in models for kind in ("eval", "triage", "rescore")},
    **{f"reports/{r}": ALL_EVALS for r in ("weekly", "scoreboard")},
    "reports/monthly": ALL_EVALS | {"tournament/e5_e6"},  # attacker success curves
}
PROGRAM_GROUPS = {"corpora", "datasets", "synthetic", "training", "safety", "evals", "tournaments", "reports"}
EXPECTED_GROUPS = {"corpus/iot23": "corpora", "dataset/e1": "datasets", "dataset/e2": "datasets",
                   "eval/e1/heuristic": "evals", "eval/e3/tool_oracle": "evals", "reports/weekly": "reports",
                   "tournament/e5_e6": "tournaments"}


def path_of(env: str, *models: str) -> set[str]:
    upstream = {"corpus/iot23", "dataset/e1"} if env == "e1" else {f"dataset/{env}"}
    return upstream | {f"{kind}/{env}/{m}" for m in models for kind in ("eval", "triage")}


E1_HEURISTIC = path_of("e1", "heuristic")
TOURNAMENT = {"tournament/e5_e6", "dataset/e5", "dataset/e6"}
DEFAULTS = (E1_HEURISTIC | path_of("e2", "heuristic", "tool_oracle") | path_of("e3", "heuristic", "tool_oracle")
            | path_of("e4", "heuristic") | path_of("e5", "heuristic") | path_of("e6", "heuristic") | TOURNAMENT)
SWEEP = (E1_HEURISTIC | path_of("e2", "heuristic") | path_of("e3", "heuristic") | path_of("e4", "heuristic")
         | path_of("e5", "heuristic") | path_of("e6", "heuristic"))
EXPECTED_JOBS = {
    "eval_e1": E1_HEURISTIC,
    "eval_e2": path_of("e2", "heuristic", "tool_oracle"),
    "eval_e3": path_of("e3", "heuristic", "tool_oracle"),
    "eval_e4": path_of("e4", "heuristic"),
    "eval_e5": path_of("e5", "heuristic"),
    "eval_e6": path_of("e6", "heuristic"),
    "tournament_e5_e6": TOURNAMENT,
    "demo": DEFAULTS,
    "weekly_sweep": SWEEP | {"reports/weekly", "reports/scoreboard"},
    "biweekly_full_eval": SWEEP | TOURNAMENT | {"reports/scoreboard"},
    "nightly_regression": SWEEP,
    "monthly_report": {"reports/monthly", "reports/scoreboard"},
    "rescore_e1": {"rescore/e1/heuristic"},
    "rescore_e2": {"rescore/e2/heuristic", "rescore/e2/tool_oracle"},
    "rescore_e3": {"rescore/e3/heuristic", "rescore/e3/tool_oracle"},
    "rescore_e4": {"rescore/e4/heuristic"},
    "rescore_e5": {"rescore/e5/heuristic"},
    "rescore_e6": {"rescore/e6/heuristic"},
}
EXPECTED_SCHEDULES = {
    "weekly_sweep_schedule": ("weekly_sweep", "0 6 * * 1"),
    "biweekly_full_eval_schedule": ("biweekly_full_eval", "0 4 * * 3"),
    "monthly_report_schedule": ("monthly_report", "0 7 1 * *"),
    "nightly_regression_schedule": ("nightly_regression", "0 3 * * *"),
}


@pytest.fixture(scope="module")
def graph() -> dg.Definitions:
    return build_definitions()


def test_asset_keys_and_deps(graph):
    asset_graph = graph.resolve_asset_graph()
    deps = {
        key.to_user_string(): {parent.to_user_string() for parent in asset_graph.get(key).parent_keys}
        for key in asset_graph.get_all_asset_keys()
    }
    assert deps == EXPECTED_DEPS


def test_groups_owners_and_provenance_on_every_asset(graph):
    specs = {spec.key.to_user_string(): spec for spec in graph.resolve_all_asset_specs()}
    for key, group in EXPECTED_GROUPS.items():
        assert specs[key].group_name == group
    for key, spec in specs.items():
        assert spec.owners == ["team:sv-research"], key
        assert spec.tags.get(PROVENANCE_TAG) == "v1", key
        assert spec.description, key
        # A readable graph: every asset in one of the program's groups, with the kinds of what it writes.
        assert spec.group_name in PROGRAM_GROUPS, (key, spec.group_name)
        assert spec.kinds and spec.kinds <= {"json", "png", "html", "markdown", "parquet"}, (key, spec.kinds)


def test_jobs_select_the_default_models_path(graph):
    for name, expected in EXPECTED_JOBS.items():
        job = graph.resolve_job_def(name)
        selected = {key.to_user_string() for key in job.asset_layer.selected_asset_keys}
        assert selected == expected
        assert not job.partitions_def  # runs as written, no partition key needed


def test_schedules_and_their_crons(graph):
    schedules = {s.name: (s.job_name, s.cron_schedule) for s in graph.schedules}
    assert schedules == EXPECTED_SCHEDULES


def test_adding_a_model_is_a_registry_edit(tmp_path: Path, monkeypatch):
    path = tmp_path / "models.yaml"
    path.write_text(
        "models:\n  heuristic:\n    backend: heuristic\n    default: true\n"
        "  my-vllm:\n    backend: openai\n    model: org/model\n    base_url: http://127.0.0.1:9/v1\n"
    )
    monkeypatch.setenv("SV_MODEL_REGISTRY", str(path))
    keys = {key.to_user_string() for key in build_definitions().resolve_asset_graph().get_all_asset_keys()}
    assert keys == {"corpus/iot23", "dataset/e1", "dataset/e2", "dataset/e3", "dataset/e4", "dataset/e5", "dataset/e6",
                    "reports/weekly", "reports/monthly", "reports/scoreboard", "tournament/e5_e6"} | {
        f"{kind}/{env}/{m}" for kind in ("eval", "triage", "rescore") for env in ("e1", "e2", "e3", "e4", "e5", "e6")
        for m in ("heuristic", "my_vllm")
    }


def test_an_asset_without_provenance_is_refused():
    @dg.asset(key=["rogue"])
    def rogue() -> int:
        return 1

    @provenance_asset(key=["fine"])
    def fine(context):  # never executed
        raise AssertionError

    require_provenance([fine])
    with pytest.raises(ValueError, match="rogue"):
        require_provenance([fine, rogue])


def test_every_eval_asset_has_a_blocking_regression_gate(graph):
    checks = {(key.asset_key.to_user_string(), key.name) for key in graph.resolve_asset_graph().asset_check_keys}
    evals = ALL_EVALS
    assert checks == {(key, "regression_gate") for key in evals}
    job = graph.resolve_job_def("eval_e1")
    assert {k.asset_key.to_user_string() for k in job.asset_layer.asset_graph.asset_check_keys} == {"eval/e1/heuristic"}
