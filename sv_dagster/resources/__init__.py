"""Dagster resources: thin, configurable wrappers over `sv_dagster.core`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import dagster as dg
from pydantic import PrivateAttr

from sv_dagster.core.models.registry import ModelSpec, registry_path
from sv_dagster.training.catalog import load_models

if TYPE_CHECKING:
    from sv_dagster.core.models.completion import Backend


class ModelRegistry(dg.ConfigurableResource):
    """The model registry file and the backends it describes (heuristic, oracle, openai).

    API keys are read from the environment variable each entry names, at call time;
    they never enter run config, metadata or logs.
    """

    registry_path: str = str(registry_path())
    _servers: Any = PrivateAttr(default=None)
    """The run's `serving.ServerPool`: a served model's server starts at its first eval and
    is stopped when the run (in-process) or the step's process (multiprocess) ends."""

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        from sv_dagster.core.models.serving import ServerPool

        self._servers = ServerPool()

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        if self._servers is not None:
            self._servers.close()

    def specs(self) -> dict[str, ModelSpec]:
        return load_models(self.registry_path)

    def spec(self, name: str) -> ModelSpec:
        specs = self.specs()
        if name not in specs:
            raise dg.Failure(f"model {name!r} is not in {self.registry_path} (known: {sorted(specs)})")
        return specs[name]

    def backend(self, name: str, env_id: str, checkpoint: str | Path | None = None) -> Backend:
        """`checkpoint`: the folder a trained (`local`) model's weights come from. The model
        asks with its settings for that environment (`ModelSpec.for_env`)."""
        from sv_dagster.core.envs import env_by_id
        from sv_dagster.core.models.backends import make_backend  # the openai client: ~1 s to import

        spec = self.spec(name)
        try:
            spec = spec.for_env(env_by_id(env_id).short)
        except KeyError:  # an environment not installed here has no settings of its own
            pass
        if not spec.served:
            return make_backend(spec, env_id, checkpoint)
        from sv_dagster.resources.serving import ModelServing  # converts a catalog model on first use

        serving = ModelServing()
        return make_backend(
            spec, env_id, checkpoint, server_options=serving.options(), resolve=serving.resolve, pool=self._servers
        )


class ExperimentTracking(dg.ConfigurableResource):
    """Weights & Biases for the training processes: offline by default (runs are written
    under the outputs root, nothing needs a key; `wandb sync` uploads them later), online
    when WANDB_API_KEY is set (authenticated through dagster-wandb's resource first), or
    disabled. Weights never go to W&B: checkpoints stay in our own storage."""

    mode: str = "auto"
    """auto (online with WANDB_API_KEY, else offline) | offline | online | disabled"""
    project: str = "sv-dagster"

    def resolved_mode(self) -> str:
        import os

        if self.mode == "auto":
            return "online" if os.environ.get("WANDB_API_KEY") else "offline"
        if self.mode not in ("offline", "online", "disabled"):
            raise dg.Failure(f"tracking mode must be auto, offline, online or disabled, not {self.mode!r}")
        return self.mode

    def settings(self, run_name: str) -> dict[str, str]:
        """What the training process is told (never the key: it reads that from its environment)."""
        from sv_dagster.core.artifacts.paths import outputs_root

        mode = self.resolved_mode()
        if mode == "online":
            self._login()
        return {"mode": mode, "project": self.project, "dir": str(outputs_root() / "wandb"), "run_name": run_name}

    def _login(self) -> None:
        import os

        from dagster_wandb import wandb_resource

        key = os.environ.get("WANDB_API_KEY")
        if not key:
            raise dg.Failure("W&B online mode needs WANDB_API_KEY in the environment")
        # dagster-wandb's resource logs in and checks the key before any training starts.
        # dagster types resource_fn as taking no argument; a function resource takes its context
        wandb_resource.resource_fn(dg.build_init_resource_context(config={"api_key": key}))  # type: ignore[call-arg]


class PipesLauncher(dg.ConfigurableResource):
    """Where work that runs in its own process runs: training stages (`python -m
    sv_dagster.training.entry SPEC.json`) and external evals (`python -m
    sv_dagster.eval_entry SPEC.json`), launched through Dagster Pipes, so logs, metrics
    and the final record stream back the same way from each place.

    - subprocess (default): a process on this machine.
    - k8s: a pod (dagster-k8s PipesK8sClient) from `image`, with a GPU when `gpus` > 0;
      the outputs root must be a volume mounted at the same path (or an fsspec URL root).
    - ray: a Ray job (dagster-ray PipesRayJobClient) on the cluster at `ray_address`.
    """

    kind: str = "subprocess"
    image: str | None = None
    namespace: str = "default"
    gpus: int = 1
    node_selector: dict[str, str] = {}
    ray_address: str | None = None
    python: str | None = None
    """Interpreter for the command (default: this one for a subprocess, `python` elsewhere)."""

    def command(self, spec_path: str, module: str = "sv_dagster.training.entry") -> list[str]:
        import sys

        python = self.python or (sys.executable if self.kind == "subprocess" else "python")
        return [python, "-m", module, spec_path]

    def client(self):
        if self.kind == "subprocess":
            return dg.PipesSubprocessClient()
        if self.kind == "k8s":
            from dagster_k8s import PipesK8sClient

            return PipesK8sClient()
        if self.kind == "ray":
            from dagster_ray import PipesRayJobClient

            return PipesRayJobClient(address=self.ray_address)
        raise dg.Failure(f"launcher kind must be subprocess, k8s or ray, not {self.kind!r}")

    def pod_spec(self) -> dict:
        resources = {"limits": {"nvidia.com/gpu": str(self.gpus)}} if self.gpus else {}
        return {
            "containers": [{"resources": resources}],
            **({"nodeSelector": dict(self.node_selector)} if self.node_selector else {}),
            **(
                {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}
                if self.gpus
                else {}
            ),
        }

    def launch(
        self,
        context: dg.AssetExecutionContext,
        spec_path: str,
        env: dict[str, str],
        module: str = "sv_dagster.training.entry",
        gpu: bool = True,
    ):
        """Run `python -m module SPEC`; returns the Pipes invocation (its custom messages hold
        the record). `gpu`: ask k8s/Ray for the GPUs (training) or not (an eval against an endpoint)."""
        from dagster._core.errors import DagsterPipesExecutionError  # not re-exported by dagster

        try:
            return self._run(context, spec_path, env, module, gpu)
        except DagsterPipesExecutionError as exc:
            raise dg.Failure(f"{module} failed: {self._reported_error(context) or exc}") from exc

    @staticmethod
    def _reported_error(context: dg.AssetExecutionContext) -> str | None:
        """The exception the external process reported through Pipes before it exited (Dagster
        records it as an engine event of this step)."""
        for entry in reversed(context.instance.all_logs(context.run_id)):
            event = entry.dagster_event
            if (
                entry.step_key == context.op_handle.name
                and event is not None
                and event.event_type_value == "ENGINE_EVENT"
                and "pipes closed with exception" in (entry.user_message or event.message or "")
            ):
                error = event.engine_event_data.error
                return f"{error.cls_name}: {error.message.strip()}" if error else None
        return None

    def _run(self, context: dg.AssetExecutionContext, spec_path: str, env: dict[str, str], module: str, gpu: bool):
        client = self.client()
        command = self.command(spec_path, module)
        if self.kind == "subprocess":
            return client.run(context=context, command=command, env=env)
        if self.kind == "k8s":
            if not self.image:
                raise dg.Failure("launcher kind k8s needs `image` (the project's image)")
            spec = self.pod_spec() if gpu else {}
            return client.run(
                context=context,
                image=self.image,
                command=command,
                namespace=self.namespace,
                env=env,
                base_pod_spec=spec,
            )
        return client.run(
            context=context,
            submit_job_params={
                "entrypoint": " ".join(command),
                "runtime_env": {"env_vars": env},
                **({"entrypoint_num_gpus": self.gpus} if self.gpus and gpu else {}),
            },
        )
