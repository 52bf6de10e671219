"""A model registry for tests: the embedded heuristic (default) plus one OpenAI-compatible
model on a loopback server."""

from __future__ import annotations

from pathlib import Path


def loopback_registry(path: Path, base_url: str, name: str = "loop", model: str = "m", extra: str = "") -> Path:
    """Write the registry; `extra` holds more YAML lines for the loopback model (indented
    by 4 spaces, e.g. "    api_key_env: KEY\\n")."""
    path.write_text(
        "models:\n  heuristic:\n    backend: heuristic\n    default: true\n"
        f"  {name}:\n    backend: openai\n    model: {model}\n    base_url: {base_url}\n{extra}"
    )
    return path
