"""Executors chosen by SV_EXECUTOR with settings from configs/executors/<name>.yaml.

k8s, celery and ray: the definitions load with each configured, every job resolves to it,
and each job's run config validates against the executor's own schema with the environment's
values; for k8s, an asset's `k8s_job_tags` and the executor's step defaults become the step
pod's spec through dagster-k8s's own functions, and the instance config for the
K8sRunLauncher validates against its schema. multiprocess and in_process run for real through
`dagster job execute`, and so does celery: a real `dagster-celery` worker with kombu's
filesystem broker and Celery's SQLite result backend (no broker server is installed here),
from a config of the shipped file's shape. Ray has no job server here (docs/deploy.md).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest
import yaml

from sv_dagster.assembly import build_definitions
from sv_dagster.executors import (
    EXECUTORS_DIR,
    FORKSERVER_PRELOAD,
    K8S_CONFIG_TAG,
    ExecutorConfigError,
    build_executor,
    default_executor,
    executor_from_env,
    k8s_job_tags,
)
from tests.conftest import REPO_ROOT
from tests.support.webserver import stop_process_group

DEPLOY_ENV = {
    "SV_K8S_IMAGE": "registry.example/sv-dagster:3f2a9c1",
    "SV_K8S_NAMESPACE": "sv-research",
    "SV_CELERY_BROKER_URL": "redis://redis.sv.svc:6379/0",
    "SV_CELERY_BACKEND_URL": "redis://redis.sv.svc:6379/1",
    "SV_RAY_ADDRESS": "http://ray-head.sv.svc:8265",
}
# What each executor's resolved config must carry (the values above, read at validation).
EXPECTED = {
    "k8s": {"job_image": DEPLOY_ENV["SV_K8S_IMAGE"], "job_namespace": DEPLOY_ENV["SV_K8S_NAMESPACE"]},
    "celery": {"broker": DEPLOY_ENV["SV_CELERY_BROKER_URL"], "backend": DEPLOY_ENV["SV_CELERY_BACKEND_URL"]},
    "ray": {"ray": {"address": DEPLOY_ENV["SV_RAY_ADDRESS"]}},
}


@pytest.fixture
def deploy_env(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for name, value in DEPLOY_ENV.items():
        monkeypatch.setenv(name, value)
    return DEPLOY_ENV


def contains(actual: dict, expected: dict) -> bool:
    return all(
        contains(actual.get(key) or {}, value) if isinstance(value, dict) else actual.get(key) == value
        for key, value in expected.items()
    )


@pytest.mark.parametrize("name", ["k8s", "celery", "ray"])
def test_definitions_resolve_every_job_with_the_executor(name, deploy_env, monkeypatch):
    monkeypatch.setenv("SV_EXECUTOR", name)
    defs = build_definitions()
    jobs = [job for job in defs.resolve_all_job_defs() if not job.name.startswith("__")]
    assert {"eval_e1", "demo", "weekly_sweep", "monthly_report", "tournament_e5_e6"} <= {job.name for job in jobs}
    needs_launch_config = []
    for job in jobs:
        assert job.executor_def.name == name, job.name
        try:
            resolved = dg.validate_run_config(job, {})  # the job's own config (sweeps set eval limits) included
        except dg.DagsterInvalidConfigError as error:
            # a job whose ops take config only a launch can give (a reviewer's sign-off):
            # nothing may be wrong but that
            assert all('"ops"' in e.message and "execution" not in e.message for e in error.errors), (job.name, error)
            needs_launch_config.append(job.name)
            continue
        execution = resolved["execution"][name]
        assert contains(execution, EXPECTED[name]), (job.name, execution)
    assert len(needs_launch_config) < len(jobs) / 2, needs_launch_config
    assert not {"eval_e1", "demo", "weekly_sweep", "monthly_report"} & set(needs_launch_config)
    # what the YAML says arrives as written
    settings = yaml.safe_load((EXECUTORS_DIR / f"{name}.yaml").read_text())
    settings = settings["execution"]["config"] if name == "celery" else settings  # the worker's shape
    if name == "k8s":
        assert execution["step_k8s_config"]["container_config"] == settings["step_k8s_config"]["container_config"]
        assert "SV_OUTPUTS_DIR" in execution["env_vars"]
    if name == "celery":
        assert execution["config_source"] == {"worker_prefetch_multiplier": 1, "task_acks_late": True}
    if name == "ray":
        assert execution["ray"]["num_cpus"] == 1 and "SV_OUTPUTS_DIR" in execution["ray"]["env_vars"]


def test_unset_keeps_dagsters_default_and_bad_choices_fail_at_load(isolated, monkeypatch, tmp_path):
    monkeypatch.delenv("SV_EXECUTOR", raising=False)
    default = build_definitions().resolve_job_def("eval_e1").executor_def
    assert default.name == executor_from_env().name == dg.multi_or_in_process_executor.name

    monkeypatch.setenv("SV_EXECUTOR", "spark")
    with pytest.raises(
        ExecutorConfigError,
        match="'spark' is not an executor; choose one of: multiprocess, in_process, k8s, celery, ray",
    ):
        build_definitions()
    monkeypatch.setenv("SV_EXECUTOR", "k8s")  # no SV_K8S_* set: named, with the file and keys
    for var in ("SV_K8S_IMAGE", "SV_K8S_NAMESPACE"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ExecutorConfigError) as raised:
        build_definitions()
    assert str(raised.value) == (
        f"{EXECUTORS_DIR / 'k8s.yaml'}: SV_EXECUTOR=k8s needs these environment variables set: "
        "job_image ($SV_K8S_IMAGE), job_namespace ($SV_K8S_NAMESPACE)"
    )

    (tmp_path / "celery.yaml").write_text("brokr: redis://x\n")
    with pytest.raises(
        ExecutorConfigError, match=r'(?s)celery.yaml: invalid celery executor config: .*unexpected config entry "brokr"'
    ):
        build_executor("celery", tmp_path / "celery.yaml")
    (tmp_path / "ray.yaml").write_text("ray: [unclosed\n")
    with pytest.raises(ExecutorConfigError, match="ray.yaml: not valid YAML"):
        build_executor("ray", tmp_path / "ray.yaml")
    (tmp_path / "k8s.yaml").write_text("- a list\n")
    with pytest.raises(ExecutorConfigError, match="k8s.yaml: expected a mapping of k8s executor settings, got list"):
        build_executor("k8s", tmp_path / "k8s.yaml")
    with pytest.raises(ExecutorConfigError, match="multiprocess.yaml: no such file"):
        build_executor("multiprocess", tmp_path / "multiprocess.yaml")


def test_k8s_tags_and_step_defaults_become_the_step_pod_spec(deploy_env, monkeypatch):
    """What K8sStepHandler.launch_step does with a step's tags, done with dagster-k8s's own
    functions: the asset's op tags, merged over the executor's step defaults, make the Job."""
    from dagster_k8s.container_context import K8sContainerContext
    from dagster_k8s.job import (
        DagsterK8sJobConfig,
        UserDefinedDagsterK8sConfig,
        construct_dagster_k8s_job,
        get_user_defined_k8s_config,
    )

    monkeypatch.setenv("SV_EXECUTOR", "k8s")
    monkeypatch.setenv("SV_OUTPUTS_DIR", "s3://sv-artifacts/prod")

    @dg.asset(op_tags=k8s_job_tags(gpu=True))
    def checkpoint_sft():
        return None

    @dg.asset
    def dataset_e1():
        return None

    job = dg.Definitions(
        assets=[checkpoint_sft, dataset_e1], executor=executor_from_env()
    ).resolve_implicit_global_asset_job_def()
    config = dg.validate_run_config(job, {})["execution"]["k8s"]

    def step_pod(step_key: str):
        step_tags = job.graph.node_named(step_key).tags  # what the executor reads as the step's tags
        executor_context = K8sContainerContext(
            image_pull_policy=config["image_pull_policy"],
            service_account_name=config["service_account_name"],
            env_vars=config["env_vars"],
            env_secrets=config["env_secrets"],
            namespace=config["job_namespace"],
            run_k8s_config=UserDefinedDagsterK8sConfig.from_dict(config["step_k8s_config"]),
        )
        context = executor_context.merge(K8sContainerContext(run_k8s_config=get_user_defined_k8s_config(step_tags)))
        job_config = DagsterK8sJobConfig(
            job_image=config["job_image"],
            dagster_home="/opt/dagster/dagster_home",
            instance_config_map="sv-dagster-instance",
        )
        k8s_job = construct_dagster_k8s_job(
            job_config,
            args=["dagster", "api", "execute_step"],
            job_name=f"dagster-step-{step_key}",
            user_defined_k8s_config=context.run_k8s_config,
            component="step_worker",
        )
        return context, k8s_job.spec.template.spec

    context, gpu = step_pod("checkpoint_sft")
    (container,) = gpu.containers
    assert container.image == DEPLOY_ENV["SV_K8S_IMAGE"] and context.namespace == DEPLOY_ENV["SV_K8S_NAMESPACE"]
    assert container.resources.limits == {"memory": "120Gi", "nvidia.com/gpu": "1"}
    assert container.resources.requests == {"cpu": "8", "memory": "64Gi"}
    assert gpu.node_selector == {"nvidia.com/gpu.present": "true"}
    assert [(t.key, t.operator, t.effect) for t in gpu.tolerations] == [("nvidia.com/gpu", "Exists", "NoSchedule")]
    assert gpu.service_account_name == "sv-dagster"
    env = {var.name: var.value for var in container.env or []}
    assert env.get("SV_OUTPUTS_DIR") == "s3://sv-artifacts/prod" and env.get("SV_EXECUTOR") == "k8s"
    assert [source.secret_ref.name for source in container.env_from] == ["sv-dagster-api-keys"]

    _, cpu = step_pod("dataset_e1")  # no tags: the executor's step defaults
    assert cpu.containers[0].resources.requests == {"cpu": "500m", "memory": "1Gi"}
    assert cpu.containers[0].resources.limits == {"memory": "4Gi"}
    assert not cpu.node_selector and not cpu.tolerations
    assert K8S_CONFIG_TAG in k8s_job_tags() and "nvidia.com/gpu" not in k8s_job_tags()[K8S_CONFIG_TAG]


def test_the_k8s_instance_config_validates_against_the_run_launcher_schema(deploy_env):
    # Dagster checks a run launcher's config only when it instantiates it (which needs a
    # cluster); the same check, through the same (internal) validator, without one.
    from dagster._config import validate_config
    from dagster._core.instance.config import dagster_instance_config
    from dagster_k8s import K8sRunLauncher

    instance_config, _ = dagster_instance_config(str(EXECUTORS_DIR), "k8s-instance.yaml")
    launcher = instance_config["run_launcher"]
    assert (launcher["module"], launcher["class"]) == ("dagster_k8s", "K8sRunLauncher")
    result = validate_config(K8sRunLauncher.config_type(), launcher["config"])
    assert result.success, [error.message for error in result.errors]
    assert result.value["instance_config_map"] == "sv-dagster-instance"
    assert "postgres" in instance_config["storage"]  # every pod shares the run and event storage


@pytest.mark.slow
@pytest.mark.parametrize("name", ["multiprocess", "in_process"])
def test_the_local_executors_run_for_real(name, isolated: Path):
    """`SV_EXECUTOR=<name> dagster job execute -j monthly_report` (two steps; an eval run with
    the default multiprocess executor is test_concurrency_pools.py): the multiprocess executor
    runs each step in its own process, the in-process one every step in the run's process."""
    run = run_job("monthly_report", SV_EXECUTOR=name)
    events = dg.DagsterInstance.get().all_logs(run.run_id)
    step_pids = {
        e.step_key: e.dagster_event.pid for e in events if e.dagster_event_type == dg.DagsterEventType.STEP_START
    }
    run_pid = next(e.dagster_event.pid for e in events if e.dagster_event_type == dg.DagsterEventType.RUN_START)
    assert set(step_pids) == {"reports__monthly", "reports__scoreboard"}
    engine = " ".join(e.message for e in events if e.dagster_event_type == dg.DagsterEventType.ENGINE_EVENT)
    if name == "multiprocess":
        assert "multiprocess executor" in engine
        assert run_pid not in step_pids.values() and len(set(step_pids.values())) == len(step_pids)
    else:
        assert "in process" in engine.lower() or "in-process" in engine.lower()
        assert set(step_pids.values()) == {run_pid}


def resolved_executor_config(executor: dg.ExecutorDefinition, run_config: dict | None = None) -> dict:
    probe = dg.GraphDefinition(name="probe").to_job(executor_def=executor)
    return dg.validate_run_config(probe, run_config or {})["execution"]


def test_local_steps_start_from_a_preloaded_forkserver_unless_the_run_says_otherwise(monkeypatch):
    monkeypatch.setattr("sv_dagster.executors._forkserver_environment", None)
    forkserver = {"forkserver": {"preload_modules": list(FORKSERVER_PRELOAD)}}
    assert "sv_dagster.definitions" in FORKSERVER_PRELOAD
    default = resolved_executor_config(default_executor())["multi_or_in_process_executor"]
    assert default["multiprocess"]["start_method"] == forkserver
    chosen = {"multiprocess": {"max_concurrent": 2, "start_method": {"spawn": {}}}}
    resolved = resolved_executor_config(default_executor(), {"execution": {"config": chosen}})
    assert resolved["multi_or_in_process_executor"]["multiprocess"]["start_method"] == {"spawn": {}}
    in_process = resolved_executor_config(default_executor(), {"execution": {"config": {"in_process": {}}}})
    assert set(in_process["multi_or_in_process_executor"]) == {"in_process"}
    assert resolved_executor_config(build_executor("multiprocess"))["multiprocess"]["start_method"] == forkserver

    # The forkserver keeps the environment it started with: a run under other variables spawns.
    monkeypatch.setenv("SV_OUTPUTS_DIR", "/elsewhere")
    moved = resolved_executor_config(default_executor())["multi_or_in_process_executor"]["multiprocess"]
    assert "start_method" not in moved  # Dagster's default: spawn


def step_parent_pid() -> int:
    return os.getppid()


@dg.op
def report_parent_pid() -> int:
    return step_parent_pid()


@dg.job(executor_def=default_executor())
def parent_pid_job():
    report_parent_pid()


@pytest.mark.slow
def test_a_default_multiprocess_run_forks_its_steps_from_the_forkserver(tmp_path: Path, monkeypatch):
    """Spawned steps are children of the run's process; forkserver steps are the server's."""
    monkeypatch.setattr("sv_dagster.executors._forkserver_environment", None)
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        with dg.execute_job(dg.reconstructable(parent_pid_job), instance) as result:
            assert result.success
            parent = result.output_for_node("report_parent_pid")
    assert parent not in (os.getpid(), 1)


def run_job(job: str, **env: str) -> dg.DagsterRun:
    environ = {**os.environ, **env}
    environ.pop("DAGSTER_CLI_JOB_EXECUTE_MODULE_NAME", None)  # the venv's .pth sets it again
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "dagster"), "job", "execute", "-j", job],
        cwd=REPO_ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = dg.DagsterInstance.get().get_runs()
    assert run.is_success
    return run


@pytest.mark.slow
def test_celery_runs_steps_on_a_real_worker(isolated: Path):
    queue, results = isolated / "celery-queue", isolated / "celery-results.sqlite"
    queue.mkdir()
    config = isolated / "celery.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "execution": {
                    "config": {
                        "broker": "filesystem://",
                        "backend": f"db+sqlite:///{results}",  # transactional: Celery's file backend can be read half-written
                        "config_source": {
                            # kombu's filesystem transport keeps exchange files in ./control unless told otherwise
                            "broker_transport_options": {
                                "data_folder_in": str(queue),
                                "data_folder_out": str(queue),
                                "control_folder": str(queue / "control"),
                            },
                            "worker_prefetch_multiplier": 1,
                            "task_acks_late": True,
                        },
                    }
                }
            }
        )
    )
    bin_dir = Path(sys.executable).parent
    environ = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}  # it starts `celery`
    log_path = isolated / "worker.log"
    with log_path.open("w") as log:
        worker = subprocess.Popen(
            [
                str(bin_dir / "dagster-celery"),
                "worker",
                "start",
                "-A",
                "dagster_celery.app",
                "-y",
                str(config),
                "-n",
                "sv-test",
            ],
            cwd=REPO_ROOT,
            env=environ,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 90
        while "ready." not in log_path.read_text():
            assert worker.poll() is None and time.monotonic() < deadline, log_path.read_text()[-3000:]
            time.sleep(0.5)
        run = run_job("monthly_report", SV_EXECUTOR="celery", SV_EXECUTOR_CONFIG=str(config), PATH=environ["PATH"])
    finally:
        stop_process_group(worker)
    events = dg.DagsterInstance.get().all_logs(run.run_id)
    engine = [e.message for e in events if e.dagster_event_type == dg.DagsterEventType.ENGINE_EVENT]
    assert any('Submitting celery task for step "reports__monthly"' in m for m in engine), engine
    step_pids = {
        e.step_key: e.dagster_event.pid for e in events if e.dagster_event_type == dg.DagsterEventType.STEP_START
    }
    run_pid = next(e.dagster_event.pid for e in events if e.dagster_event_type == dg.DagsterEventType.RUN_START)
    assert set(step_pids) == {"reports__monthly", "reports__scoreboard"} and run_pid not in step_pids.values()
    worker_log = log_path.read_text()
    assert worker_log.count("Task execute_plan[") >= 2 and " succeeded in " in worker_log  # the worker ran them
    with sqlite3.connect(results) as db:  # one stored result per step, in the backend
        assert db.execute("SELECT status, count(*) FROM celery_taskmeta GROUP BY status").fetchall() == [("SUCCESS", 2)]
