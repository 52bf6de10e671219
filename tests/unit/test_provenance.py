"""Provenance facts: hashes, secrets, git state."""

from __future__ import annotations

from pathlib import Path

from sv_dagster.core.provenance import build_provenance, config_hash, content_hash, git_state
from sv_dagster.core.redaction import REDACTED, redact, secret_values


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_content_hash_depends_on_bytes_and_names_not_on_location(tmp_path: Path):
    a = write_tree(tmp_path / "a" / "run", {"x.jsonl": "1\n", "sub/y.json": "{}"})
    b = write_tree(tmp_path / "b" / "run", {"x.jsonl": "1\n", "sub/y.json": "{}"})
    assert content_hash([a]) == content_hash([b])
    (b / "x.jsonl").write_text("2\n")
    assert content_hash([a]) != content_hash([b])
    (b / "x.jsonl").write_text("1\n")
    (b / "sub" / "y.json").rename(b / "sub" / "z.json")
    assert content_hash([a]) != content_hash([b])


def test_config_hash_ignores_key_order():
    assert config_hash({"a": 1, "b": [1, 2]}) == config_hash({"b": [1, 2], "a": 1})
    assert config_hash({"a": 1}) != config_hash({"a": 2})


def test_redact_removes_secret_keys_and_known_secret_values():
    secrets = secret_values({"OPENAI_API_KEY": "sk-live-1234567890", "HOME": "/root", "API_KEY_ENV": "x" * 20})
    assert secrets == {"sk-live-1234567890"}
    cleaned = redact(
        {
            "api_key": "anything",
            "api_key_env": "OPENAI_API_KEY",
            "max_tokens": 64,
            "nested": [{"Authorization": "Bearer abc"}, "url?key=sk-live-1234567890"],
        },
        secrets,
    )
    assert cleaned["api_key"] == REDACTED
    assert cleaned["api_key_env"] == "OPENAI_API_KEY"  # the variable's name is not a secret
    assert cleaned["max_tokens"] == 64
    assert cleaned["nested"][0]["Authorization"] == REDACTED
    assert "sk-live" not in cleaned["nested"][1]


def test_git_state_reads_this_checkout():
    state = git_state()
    assert set(state) == {"git_commit", "git_dirty"}
    assert state["git_commit"] == "unknown" or len(state["git_commit"]) == 40


def test_build_provenance_has_every_required_field(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-secret-value-42")
    out = write_tree(tmp_path / "art", {"a.txt": "hello"})
    record = build_provenance(
        config={"n": 3, "header": "Bearer tok-secret-value-42"},
        written=[out],
        seed=7,
        inputs={"corpus/iot23": "abc"},
        packages=["sv-env-network-logs"],
    )
    for key in ("git_commit", "git_dirty", "packages", "config", "config_hash", "input_data_versions", "content_hash", "seed"):
        assert key in record, key
    assert record["seed"] == 7 and record["input_data_versions"] == {"corpus/iot23": "abc"}
    assert {"dagster", "verifiers", "sv-env-network-logs"} <= set(record["packages"])
    assert "tok-secret-value-42" not in str(record)
