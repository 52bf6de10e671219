"""Provenance facts: hashes, secrets, git state, and the record written with each artifact."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg

from sv_dagster.assets.recipe import Artifact, provenance_asset
from sv_dagster.core.artifacts.provenance import (
    build_provenance,
    config_hash,
    content_hash,
    git_state,
    provenance_path,
)
from sv_dagster.core.artifacts.redaction import REDACTED, redact, secret_values
from sv_dagster.core.artifacts.storage import PROVENANCE_FILE


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
    for key in (
        "git_commit",
        "git_dirty",
        "packages",
        "config",
        "config_hash",
        "input_data_versions",
        "content_hash",
        "seed",
    ):
        assert key in record, key
    assert record["seed"] == 7 and record["input_data_versions"] == {"corpus/iot23": "abc"}
    assert {"dagster", "verifiers", "sv-env-network-logs"} <= set(record["packages"])
    assert "tok-secret-value-42" not in str(record)


def test_a_folders_provenance_record_is_not_part_of_its_hash(tmp_path: Path):
    folder = write_tree(tmp_path / "run", {"x.jsonl": "1\n", "sub/y.json": "{}"})
    before = content_hash([folder])
    assert provenance_path(folder) == folder / PROVENANCE_FILE
    (folder / PROVENANCE_FILE).write_text('{"content_hash": "..."}\n')
    assert content_hash([folder]) == before
    # only the record at the top is left out: a nested file of that name is content
    (folder / "sub" / PROVENANCE_FILE).write_text("{}\n")
    assert content_hash([folder]) != before


def test_a_files_provenance_record_is_a_sidecar_outside_its_hash(tmp_path: Path):
    file = write_tree(tmp_path, {"x.jsonl": "1\n"}) / "x.jsonl"
    before = content_hash([file])
    assert provenance_path(file) == tmp_path / "x.jsonl.provenance.json"
    provenance_path(file).write_text("{}\n")
    assert content_hash([file]) == before


def _materialize_tiny_assets(outputs: Path):
    """A folder asset and a single-file asset downstream of it, materialized in-process."""

    @provenance_asset(key=["tiny", "folder"])
    def tiny_folder(context) -> Artifact:
        out = write_tree(outputs / "tiny" / context.run_id[:8], {"rows.jsonl": '{"id": 1}\n', "sub/meta.json": "{}"})
        return Artifact(path=out, config={"n": 1, "api_key": "sk-never-recorded-0123456789abcdef"}, seed=5)

    @provenance_asset(key=["tiny", "file"], deps=[tiny_folder])
    def tiny_file(context) -> Artifact:
        out = write_tree(outputs / "notes", {"tiny.md": "# tiny\n"}) / "tiny.md"
        return Artifact(path=out, config={"kind": "notes"}, facts={"model_id": "m1"})

    instance = dg.DagsterInstance.get()
    result = dg.materialize([tiny_folder, tiny_file], instance=instance)
    assert result.success

    def written(key: list[str]) -> tuple[Path, str, str]:
        entry = instance.get_latest_materialization_event(dg.AssetKey(key))
        path = Path(entry.asset_materialization.metadata["artifact_path"].value)
        return path, entry.tags["dagster/data_version"], result.run_id

    return written(["tiny", "folder"]), written(["tiny", "file"])


def test_materializing_writes_the_provenance_record_with_the_artifact(isolated: Path):
    (folder, folder_version, run_id), (file, file_version, _) = _materialize_tiny_assets(isolated / "outputs")
    git = git_state()

    assert folder.is_dir() and sorted(p.name for p in folder.iterdir()) == ["provenance.json", "rows.jsonl", "sub"]
    record = json.loads((folder / "provenance.json").read_text())
    assert record["git_commit"] == git["git_commit"] and record["git_dirty"] == git["git_dirty"]
    assert record["config_hash"] == config_hash(record["config"]) and record["config"]["n"] == 1
    assert (
        record["config"]["api_key"] == REDACTED and "sk-never-recorded" not in (folder / "provenance.json").read_text()
    )
    assert record["input_data_versions"] == {}
    assert record["content_hash"] == folder_version == content_hash([folder])
    assert record["dagster_run_id"] == run_id and record["seed"] == 5
    assert {"dagster", "sv-dagster"} <= set(record["packages"])

    assert file.is_file() and not (file.parent / "provenance.json").exists()
    sidecar = file.parent / "tiny.md.provenance.json"
    record = json.loads(sidecar.read_text())
    assert record["git_commit"] == git["git_commit"] and record["git_dirty"] == git["git_dirty"]
    assert record["config_hash"] == config_hash({"kind": "notes"})
    assert record["input_data_versions"] == {"tiny/folder": folder_version}  # what it was made from
    assert record["content_hash"] == file_version == content_hash([file])
    assert record["dagster_run_id"] == run_id and record["model_id"] == "m1"
    assert sidecar.read_text().startswith('{\n  "config"')  # sorted keys, indented
