"""The artifact store (core/storage.py) on real fsspec filesystems: `memory://` and `file://`.
Publishing keeps the relative layout and the bytes (the store's content hash equals the local
one), fetching is whole-or-nothing, and an Artifact written on one machine is usable on
another whose staging root is empty."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import dagster as dg
import pytest

from sv_dagster.assets.recipe import Artifact, localize_artifact, publish_artifact
from sv_dagster.core.artifacts import storage
from sv_dagster.core.artifacts.paths import PROJECT_ROOT, outputs_root, outputs_url
from sv_dagster.core.artifacts.provenance import content_hash, provenance_path
from sv_dagster.core.artifacts.storage import PROVENANCE_FILE
from sv_dagster.instance import local_artifact_path


@pytest.fixture
def memory_root() -> str:
    """A fresh prefix in fsspec's process-wide memory filesystem."""
    return f"memory://sv-test-{uuid.uuid4().hex[:12]}"


def write_eval_folder(root: Path) -> Path:
    folder = root / "evals" / "sv-env-network-logs--heuristic" / "run-1"
    (folder / "nested").mkdir(parents=True)
    (folder / "metadata.json").write_text('{"model": "heuristic"}\n')
    (folder / "results.jsonl").write_bytes(b'{"id": 1}\n{"id": 2}\n' + bytes(range(256)))
    (folder / "nested" / "plot.png").write_bytes(b"\x89PNG\r\n" + b"\0" * 3000)
    return folder


def tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_urls_and_roots():
    assert storage.is_url("s3://bucket/prefix") and storage.is_url("file:///tmp/x") and storage.is_url("memory://")
    assert not storage.is_url("/srv/outputs") and not storage.is_url("outputs") and not storage.is_url("C:\\outputs")
    assert storage.normalize_root("s3://bucket/prefix//") == "s3://bucket/prefix"
    assert storage.normalize_root("memory://") == "memory://"
    assert storage.join("s3://bucket/prefix", "/evals/a/") == "s3://bucket/prefix/evals/a"
    assert storage.join("memory://", "evals/a") == "memory://evals/a"
    with pytest.raises(storage.StorageError, match="not an fsspec URL"):
        storage.normalize_root("/srv/outputs")


def test_outputs_root_is_a_local_staging_copy_when_the_root_is_a_url(monkeypatch, tmp_path):
    monkeypatch.delenv("SV_STAGING_DIR", raising=False)
    monkeypatch.setenv("SV_OUTPUTS_DIR", str(tmp_path / "plain"))
    assert outputs_url() is None and outputs_root() == tmp_path / "plain"
    monkeypatch.setenv("SV_OUTPUTS_DIR", "s3://team-bucket/sv/")
    assert outputs_url() == "s3://team-bucket/sv"
    assert outputs_root() == PROJECT_ROOT / ".cache" / "outputs"
    monkeypatch.setenv("SV_STAGING_DIR", str(tmp_path / "staging"))
    assert outputs_root() == tmp_path / "staging"


@pytest.mark.parametrize("kind", ["memory", "file"])
def test_publish_keeps_layout_and_bytes_and_fetch_returns_them(kind, memory_root, tmp_path):
    root_url = memory_root if kind == "memory" else (tmp_path / "remote").as_uri()
    local_root = tmp_path / "staging"
    folder = write_eval_folder(local_root)

    url = storage.publish(folder, local_root, root_url)
    assert url == f"{root_url}/evals/sv-env-network-logs--heuristic/run-1"
    assert storage.content_hash_at(url) == content_hash([folder])
    if kind == "file":  # the same layout, visible as plain files
        assert tree(tmp_path / "remote" / "evals" / "sv-env-network-logs--heuristic" / "run-1") == tree(folder)

    single = storage.publish(folder / "results.jsonl", local_root, root_url)
    assert single == f"{url}/results.jsonl"
    assert storage.content_hash_at(single) == content_hash([folder / "results.jsonl"])

    elsewhere = tmp_path / "elsewhere" / "run-1"
    assert storage.fetch(url, elsewhere) == elsewhere
    assert tree(elsewhere) == tree(folder)
    assert not [p for p in elsewhere.parent.iterdir() if ".fetch-" in p.name]  # no partial copy left
    storage.fetch(single, tmp_path / "one.jsonl")
    assert (tmp_path / "one.jsonl").read_bytes() == (folder / "results.jsonl").read_bytes()

    # a changed byte changes the store's hash: the check can fail
    (folder / "results.jsonl").write_bytes(b"tampered")
    storage.publish(folder / "results.jsonl", local_root, root_url)
    assert storage.content_hash_at(url) != content_hash([elsewhere])


def test_errors_name_the_path_or_url(memory_root, tmp_path):
    with pytest.raises(storage.StorageError, match=r"not under the outputs root"):
        storage.publish(tmp_path / "outside.txt", tmp_path / "staging", memory_root)
    with pytest.raises(storage.StorageError, match=r"nothing to publish"):
        storage.publish(tmp_path / "staging" / "missing", tmp_path / "staging", memory_root)
    missing = f"{memory_root}/evals/none"
    with pytest.raises(storage.StorageError, match=f"{missing}: not in the artifact store"):
        storage.fetch(missing, tmp_path / "x")
    assert not (tmp_path / "x").exists()
    with pytest.raises(storage.StorageError, match="cannot open this artifact store"):
        storage.publish(write_eval_folder(tmp_path / "s"), tmp_path / "s", "nosuchproto://bucket")


def test_localize_maps_another_machines_paths_into_this_staging_root(memory_root, tmp_path):
    machine_a, machine_b = tmp_path / "a", tmp_path / "b"
    folder = write_eval_folder(machine_a)
    url = storage.publish(folder, machine_a, memory_root)
    outside = tmp_path / "not-an-artifact.txt"
    paths = [folder, folder / "results.jsonl", outside]
    got = storage.localize(paths, artifact_url=url, artifact_path=folder, root_url=memory_root, local_root=machine_b)
    assert got == [
        machine_b / folder.relative_to(machine_a),
        machine_b / folder.relative_to(machine_a) / "results.jsonl",
        outside,
    ]
    assert tree(got[0]) == tree(folder)
    with pytest.raises(storage.StorageError, match="not under this machine's artifact root"):
        storage.localize(paths, artifact_url=url, artifact_path=folder, root_url="memory://other", local_root=machine_b)
    with pytest.raises(storage.StorageError, match="does not end in"):
        storage.localize(
            paths, artifact_url=url, artifact_path=tmp_path / "x", root_url=memory_root, local_root=machine_b
        )


def test_an_artifact_published_here_is_usable_from_an_empty_staging_root(memory_root, tmp_path, monkeypatch):
    monkeypatch.setenv("SV_OUTPUTS_DIR", memory_root)
    monkeypatch.setenv("SV_STAGING_DIR", str(tmp_path / "staging-a"))
    folder = write_eval_folder(outputs_root())
    notes = outputs_root() / "notes" / "triage.md"  # a named file outside the artifact's folder
    notes.parent.mkdir()
    notes.write_text("# triage\n")
    artifact = publish_artifact(
        Artifact(path=folder, config={}, files={"results": folder / "results.jsonl", "notes": notes})
    )
    assert artifact.uri == f"{memory_root}/evals/sv-env-network-logs--heuristic/run-1"
    assert localize_artifact(artifact) is artifact  # everything is here: nothing to fetch
    written = tree(folder)
    shutil.rmtree(tmp_path / "staging-a")  # the machine that wrote it is gone

    monkeypatch.setenv("SV_STAGING_DIR", str(tmp_path / "staging-b"))  # another machine
    moved = localize_artifact(artifact)
    assert moved.path == tmp_path / "staging-b" / "evals" / "sv-env-network-logs--heuristic" / "run-1"
    assert tree(moved.path) == written
    assert moved.files["results"] == moved.path / "results.jsonl"
    assert (
        moved.files["notes"].read_text() == "# triage\n"
        and moved.files["notes"].parent == tmp_path / "staging-b" / "notes"
    )
    assert moved.uri == artifact.uri and moved.config == artifact.config

    monkeypatch.setenv("SV_STAGING_DIR", str(tmp_path / "staging-c"))  # a third, reading the instance
    metadata = {
        "artifact_path": dg.MetadataValue.path(str(folder)),
        "artifact_uri": dg.MetadataValue.path(artifact.uri),
    }
    assert local_artifact_path(metadata) == tmp_path / "staging-c" / folder.relative_to(tmp_path / "staging-a")
    assert tree(local_artifact_path(metadata)) == written

    monkeypatch.setenv("SV_OUTPUTS_DIR", str(tmp_path / "plain"))  # misconfigured: not the store
    with pytest.raises(storage.StorageError, match="SV_OUTPUTS_DIR is not a URL on this machine"):
        localize_artifact(artifact)


@pytest.mark.parametrize("kind", ["memory", "file"])
def test_the_store_leaves_a_folders_provenance_record_out_of_its_hash_too(kind, memory_root, tmp_path):
    root_url = memory_root if kind == "memory" else (tmp_path / "remote").as_uri()
    local_root = tmp_path / "staging"
    folder = write_eval_folder(local_root)
    before = content_hash([folder])
    (folder / PROVENANCE_FILE).write_text(f'{{"content_hash": "{before}"}}\n')
    url = storage.publish(folder, local_root, root_url)
    assert storage.content_hash_at(url) == content_hash([folder]) == before
    # a nested file of that name is content, on both sides
    (folder / "nested" / PROVENANCE_FILE).write_text("{}\n")
    storage.publish(folder, local_root, root_url)
    assert storage.content_hash_at(url) == content_hash([folder]) != before


def test_a_single_files_provenance_sidecar_is_published_beside_it(memory_root, tmp_path, monkeypatch):
    monkeypatch.setenv("SV_OUTPUTS_DIR", memory_root)
    monkeypatch.setenv("SV_STAGING_DIR", str(tmp_path / "staging"))
    notes = outputs_root() / "notes" / "triage.md"
    notes.parent.mkdir(parents=True)
    notes.write_text("# triage\n")
    provenance_path(notes).write_text('{"seed": 1}\n')
    artifact = publish_artifact(Artifact(path=notes, config={}))
    assert artifact.uri == f"{memory_root}/notes/triage.md"
    storage.fetch(f"{memory_root}/notes/triage.md.provenance.json", tmp_path / "fetched.json")
    assert (tmp_path / "fetched.json").read_text() == '{"seed": 1}\n'
    assert storage.content_hash_at(artifact.uri) == content_hash([notes])  # the sidecar is not the file's content
