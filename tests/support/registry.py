"""Model registries for tests: the embedded heuristic (default) plus one OpenAI-compatible
model on a loopback server; the project's registry without its served models' defaults, or
with smaller N for them."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def loopback_registry(path: Path, base_url: str, name: str = "loop", model: str = "m", extra: str = "") -> Path:
    """Write the registry; `extra` holds more YAML lines for the loopback model (indented
    by 4 spaces, e.g. "    api_key_env: KEY\\n")."""
    path.write_text(
        "models:\n  heuristic:\n    backend: heuristic\n    default: true\n"
        f"  {name}:\n    backend: openai\n    model: {model}\n    base_url: {base_url}\n{extra}"
    )
    return path


def rule_baselines_registry(path: Path) -> Path:
    """configs/models.yaml as it is, but for its served models' `default: true` and `sweep:
    true`: the eval and sweep jobs the pipeline tests run score the rule baselines and oracles,
    not models served on this CPU (a minute per eval for SmolLM2; the Qwen models' sweep fetches
    1.5 GB of wheels and converts 2.4B parameters). The served models are evaluated through the
    real registry by the full demo's test, tests/integration/test_serving.py and
    tests/integration/test_qwen_base.py."""
    return _project_registry(path, served={"default": False, "sweep": False})


DEMO_SERVED_LIMIT = {"e1": 4, "e2": 2, "e3": 2, "e4": 4, "e5": 2, "e6": 4}
"""N per environment for the served models in the tests' demo: real rows of every table, in
a fraction of the minutes the registry's own N takes on the test session's longest path."""

DEMO_SERVED_MODEL = "smollm2-135m"
"""The one served model the tests' demo evaluates, as the project's demo does. The
Qwen2.5-Coder models (in the sweep, not the demo) take the same path:
tests/integration/test_qwen_base.py serves the 0.5B."""


def small_n_registry(path: Path) -> Path:
    """configs/models.yaml as it is, but its served models evaluate DEMO_SERVED_LIMIT examples,
    and only DEMO_SERVED_MODEL of them by default."""
    return _project_registry(path, served={"limit": dict(DEMO_SERVED_LIMIT)}, only_default=DEMO_SERVED_MODEL)


def _project_registry(path: Path, served: dict, only_default: str | None = None) -> Path:
    """Write configs/models.yaml to `path` with `served`'s keys set on each served model (and
    `default` kept only on `only_default` among them, when given)."""
    import yaml

    data = yaml.safe_load((REPO_ROOT / "configs" / "models.yaml").read_text())
    for name, spec in data["models"].items():
        if spec.get("serve"):
            spec.update(served)
            if only_default is not None and name != only_default:
                spec["default"] = False
            if "limit" in served and spec.get("envs"):
                spec["limit"] = {env: n for env, n in served["limit"].items() if env in spec["envs"]}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path
