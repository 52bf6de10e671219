"""No API key is stored anywhere: a full `make demo` plus a keyed red-team eval over HTTP,
with every key the registry names set (one of them from a secrets file outside the
repository), then a byte scan of outputs/, the instance (event log, run and compute logs)
and the console output for each key value and for common key patterns."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from sv_dagster.core.models.registry import load_registry
from tests.conftest import REPO_ROOT
from tests.support.openai_server import LoopbackOpenAIServer

KEY_PATTERNS = [
    re.compile(rb"sk-[A-Za-z0-9_\-]{20,}"),  # OpenAI / Anthropic style
    re.compile(rb"AKIA[0-9A-Z]{16}"),  # AWS access key id
    re.compile(rb"ghp_[A-Za-z0-9]{36}"),  # GitHub token
    re.compile(rb"xox[abprs]-[A-Za-z0-9-]{10,}"),  # Slack token
    re.compile(rb"AIza[0-9A-Za-z_\-]{35}"),  # Google API key
    re.compile(rb"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
]


def test_no_key_reaches_outputs_the_instance_or_logs_after_a_full_demo(full_demo, tmp_path: Path):
    env_vars = sorted(
        {spec.api_key_env for spec in load_registry(REPO_ROOT / "configs" / "models.yaml").values() if spec.api_key_env}
    )
    assert {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "VLLM_API_KEY"} <= set(env_vars)
    keys, environ, root = full_demo.keys, full_demo.environ, full_demo.root
    assert set(env_vars) <= set(keys) and all(environ[name] == keys[name] for name in env_vars)
    assert "LOOP_KEY" not in environ and keys["LOOP_KEY"] in Path(environ["SV_SECRETS_FILE"]).read_text()
    cli = str(Path(sys.executable).parent / "sv-dagster")

    demo = full_demo.proc
    assert demo.returncode == 0, demo.stderr[-3000:]
    with LoopbackOpenAIServer(lambda req: "I can't help with that.", require_api_key=keys["LOOP_KEY"]) as server:
        registry = tmp_path / "models.yaml"
        registry.write_text(
            (REPO_ROOT / "configs" / "models.yaml").read_text()
            + f"  loop:\n    backend: openai\n    model: m\n    base_url: {server.base_url}\n    api_key_env: LOOP_KEY\n"
        )
        keyed = subprocess.run(
            [cli, "eval", "e5", "--models", "loop", "--target", "loop", "--n", "3"],
            cwd=REPO_ROOT,
            env={**environ, "SV_MODEL_REGISTRY": str(registry)},
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert keyed.returncode == 0, keyed.stderr[-3000:]
        assert len(server.requests) >= 6  # the key was really used (attacker and target calls)

    blobs = {
        "demo console": (demo.stdout + demo.stderr).encode(),
        "eval console": (keyed.stdout + keyed.stderr).encode(),
    }
    files = [p for top in (root / "outputs", root / "dagster_home") for p in top.rglob("*") if p.is_file()]
    assert any(p.suffix == ".db" for p in files) and any(p.name == "results.jsonl" for p in files)
    blobs.update({str(p): p.read_bytes() for p in files})
    for where, blob in blobs.items():
        for name, value in keys.items():
            assert value.encode() not in blob, f"{name} in {where}"
        for pattern in KEY_PATTERNS:
            assert not pattern.search(blob), f"{pattern.pattern!r} in {where}"
