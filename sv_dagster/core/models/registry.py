"""The model registry: which models exist, how to reach them, which are evaluated by default.

`configs/models.yaml` (or `SV_MODEL_REGISTRY`) is the one place to add a model; the eval
assets are generated from it, so adding a model needs no code change.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sv_dagster.core.artifacts.paths import CONFIGS_DIR, slug
from sv_dagster.core.artifacts.yamlfile import read_yaml_mapping
from sv_shared.errors import UserError

BACKENDS = ("heuristic", "oracle", "openai", "local")
LOCAL_BACKENDS = ("heuristic", "oracle", "local")
"""Backends that run in this process and call no endpoint."""


class RegistryError(UserError, ValueError):
    """A registry file that cannot be used; the message names the file and the model."""


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.0
    max_tokens: int = 512
    top_p: float = 1.0
    seed: int | None = 0
    timeout_s: float = 60.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "top_p": self.top_p,
            "seed": self.seed,
            "timeout_s": self.timeout_s,
        }


@dataclass(frozen=True)
class ModelSpec:
    name: str
    """Registry name; also the eval folder name and (slugged) the asset key part."""
    backend: str
    model: str
    """Model id sent to the endpoint (for heuristic: the baseline's name)."""
    base_url: str | None = None
    api_key_env: str | None = None
    """Name of the env var holding the API key (never the key itself)."""
    default: bool = False
    """Evaluated by `dagster job execute -j eval_eN` and the demo."""
    sweep: bool = False
    """In the weekly quick sweep and the bi-weekly full eval."""
    nightly: bool = False
    """In the nightly regression."""
    envs: tuple[str, ...] = ()
    """Environments this model is evaluated on; empty means all."""
    max_concurrency: int = 4
    requests_per_minute: int | None = None
    """Provider rate limit to stay under (None: no cap beyond the adaptive concurrency)."""
    max_reply_bytes: int = 262144
    """A reply with more text than this is an endpoint fault (a runaway or garbled body),
    recorded as a model error and never scored."""
    sampling: Sampling = field(default_factory=Sampling)
    description: str = ""
    checkpoint_asset: str | None = None
    """Trained checkpoints (backend `local`): the asset whose latest materialization holds
    the checkpoint folder (e.g. `safety_review/e1/rlft_stage1`). The eval asset depends on it,
    so the eval's lineage names the exact checkpoint it scored."""
    serve: str | None = None
    """`openai` models served here: a base model of configs/base_models.yaml or a checkpoint
    folder, started on loopback for the eval (`sv_dagster.core.models.serving`) and asked
    over HTTP like any hosted model; its URL is chosen when it starts, so no base_url."""
    limits: tuple[tuple[str, int], ...] = ()
    """(environment, N): how many examples an eval of this model scores when its run sets no
    `limit` (a subset drawn under the run's seed; a smaller split is scored whole). For models
    too slow to score a whole split in a demo; the eval tables show the N."""
    max_tokens_by_env: tuple[tuple[str, int], ...] = ()
    """(environment, max_tokens): the reply budget on an environment whose answers are longer
    or shorter than `sampling.max_tokens` allows for (a list of findings, a diff, a label)."""

    def for_env(self, env: str) -> ModelSpec:
        """This model as an eval of `env` asks it: its `max_tokens` for that environment."""
        tokens = dict(self.max_tokens_by_env).get(env)
        return self if tokens is None else replace(self, sampling=replace(self.sampling, max_tokens=tokens))

    @property
    def served(self) -> bool:
        """Served on loopback for its evals: a `serve:` entry, or a checkpoint trained here
        (`checkpoint_asset`) with the `openai` backend."""
        return self.backend == "openai" and (self.serve is not None or self.checkpoint_asset is not None)

    def limit_for(self, env: str) -> int | None:
        return dict(self.limits).get(env)

    @property
    def key(self) -> str:
        return slug(self.name)

    @property
    def pool(self) -> str | None:
        """The Dagster concurrency pool of this model's eval assets: one per endpoint (host and
        port), so models served by one provider or vLLM server share it and a sweep runs one
        eval per endpoint at a time (`concurrency.pools` in dagster.yaml); each eval keeps its
        own request concurrency. None for the embedded backends, which call nothing."""
        if self.backend in LOCAL_BACKENDS or not self.base_url:
            return None
        netloc = urlsplit(self.base_url).netloc.lower() or self.base_url
        return "endpoint-" + re.sub(r"[^a-z0-9.]+", "-", netloc).strip("-")

    def supports(self, env: str) -> bool:
        return not self.envs or env in self.envs

    def public_dict(self) -> dict[str, Any]:
        """What provenance records about the model: everything but secrets."""
        return {
            "name": self.name,
            "backend": self.backend,
            "model": self.model,
            "base_url": self.base_url,
            "api_key_env": self.api_key_env,
            "sampling": self.sampling.as_dict(),
            "max_reply_bytes": self.max_reply_bytes,
            **({"checkpoint_asset": self.checkpoint_asset} if self.checkpoint_asset else {}),
            **({"serve": self.serve} if self.serve else {}),
            **({"limits": dict(self.limits)} if self.limits else {}),
            **({"max_tokens_by_env": dict(self.max_tokens_by_env)} if self.max_tokens_by_env else {}),
        }


def registry_path() -> Path:
    return Path(os.environ.get("SV_MODEL_REGISTRY") or CONFIGS_DIR / "models.yaml")


_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand_env(value: Any) -> Any:
    """`${VAR}` / `${VAR:-default}` in registry strings (endpoint URLs live in .env)."""
    if not isinstance(value, str):
        return value
    return _ENV_REF.sub(lambda m: os.environ.get(m.group(1)) or (m.group(2) or ""), value)


def _positive_int(value: Any, field_name: str, name: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise RegistryError(f"{where}: model {name!r}: {field_name} must be a positive integer, got {value!r}")
    return value


def _per_env(raw: Any, envs: tuple[str, ...], name: str, where: str, key: str = "limit") -> tuple[tuple[str, int], ...]:
    """`limit: {e1: 24, e5: 8}` (or `max_tokens: {e2: 512}`): a positive integer per
    environment (of `envs`, when given)."""
    if raw is None:
        return ()
    if not isinstance(raw, dict) or not raw:
        raise RegistryError(f"{where}: model {name!r}: {key} must map environments to N, e.g. {{e1: 24}}; got {raw!r}")
    values = []
    for env, n in raw.items():
        if envs and env not in envs:
            raise RegistryError(f"{where}: model {name!r}: {key} names {env!r}, which is not in its envs {list(envs)}")
        values.append((str(env), _positive_int(n, f"{key} of {env}", name, where)))
    return tuple(sorted(values))


def _spec(name: str, raw: Any, where: str) -> ModelSpec:
    if not isinstance(raw, dict):
        raise RegistryError(f"{where}: model {name!r} must be a mapping")
    raw = {key: expand_env(value) for key, value in raw.items()}
    backend = raw.get("backend")
    if backend not in BACKENDS:
        raise RegistryError(f"{where}: model {name!r} has backend {backend!r}; known: {list(BACKENDS)}")
    serve = raw.get("serve")
    if serve is not None:
        _check_serve(name, raw, where)
    elif backend == "openai":
        for required in ("base_url", "model"):
            if not raw.get(required):
                raise RegistryError(f"{where}: model {name!r} (openai backend) needs '{required}'")
    if backend == "local" and not (raw.get("model") or raw.get("checkpoint_asset")):
        raise RegistryError(f"{where}: model {name!r} (local backend) needs 'model' (a checkpoint folder or model id)")
    sampling_raw = raw.get("sampling") or {}
    try:
        sampling = Sampling(**sampling_raw)
    except TypeError as exc:
        raise RegistryError(f"{where}: model {name!r} sampling: {exc}") from exc
    envs = tuple(raw.get("envs") or ())
    return ModelSpec(
        name=name,
        backend=backend,
        model=str(raw.get("model") or serve or name),
        base_url=raw.get("base_url"),
        api_key_env=raw.get("api_key_env"),
        default=bool(raw.get("default", False)),
        sweep=bool(raw.get("sweep", False)),
        nightly=bool(raw.get("nightly", False)),
        envs=envs,
        max_concurrency=int(raw.get("max_concurrency", 4)),
        requests_per_minute=int(raw["requests_per_minute"]) if raw.get("requests_per_minute") else None,
        max_reply_bytes=_positive_int(
            raw.get("max_reply_bytes", ModelSpec.max_reply_bytes), "max_reply_bytes", name, where
        ),
        sampling=sampling,
        description=str(raw.get("description", "")),
        checkpoint_asset=raw.get("checkpoint_asset"),
        serve=str(serve) if serve is not None else None,
        limits=_per_env(raw.get("limit"), envs, name, where),
        max_tokens_by_env=_per_env(raw.get("max_tokens"), envs, name, where, key="max_tokens"),
    )


def is_checkpoint_path(value: str) -> bool:
    """A `serve:` value that names a folder rather than a base model of the catalog."""
    return "/" in value or "\\" in value or value.startswith((".", "~")) or Path(value).expanduser().exists()


def _check_serve(name: str, raw: dict[str, Any], where: str) -> None:
    """`serve:` is for the openai backend, without a base_url, and names a catalog base model
    or a folder (a folder is checked when the server starts: a checkpoint may come later)."""
    serve = raw["serve"]
    if raw.get("backend") != "openai":
        raise RegistryError(f"{where}: model {name!r}: 'serve' needs backend openai, not {raw.get('backend')!r}")
    if raw.get("base_url"):
        raise RegistryError(
            f"{where}: model {name!r}: give 'serve' or 'base_url', not both (a served model's URL is chosen "
            "when its server starts)"
        )
    if not isinstance(serve, str) or not serve.strip():
        raise RegistryError(f"{where}: model {name!r}: 'serve' must name a base model or a checkpoint folder")
    if is_checkpoint_path(serve):
        return
    from sv_dagster.core.models.base_weights import catalog_entry, catalog_names

    if catalog_entry(serve) is None:
        raise RegistryError(
            f"{where}: model {name!r}: serve {serve!r} is neither a base model of configs/base_models.yaml "
            f"({', '.join(catalog_names())}) nor a checkpoint folder path"
        )


def load_registry(path: str | Path | None = None, extra: dict[str, ModelSpec] | None = None) -> dict[str, ModelSpec]:
    """The registry file's models, over `extra` ones (the models of checkpoints trained here,
    `sv_dagster.training.catalog.load_models`): an entry in the file with the same name wins.
    Two models whose asset keys collide are refused."""
    path = Path(path) if path else registry_path()
    data = read_yaml_mapping(path, RegistryError, "model registry")
    models = data.get("models")
    if not isinstance(models, dict) or not models:
        raise RegistryError(f"{path}: expected a non-empty 'models:' mapping")
    specs = {**(extra or {}), **{str(name): _spec(str(name), raw, str(path)) for name, raw in models.items()}}
    keys: dict[str, str] = {}
    for spec in specs.values():
        if spec.key in keys:
            raise RegistryError(
                f"{path}: models {keys[spec.key]!r} and {spec.name!r} map to the same asset key {spec.key!r}"
            )
        keys[spec.key] = spec.name
    return specs
