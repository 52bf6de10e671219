"""The Great Expectations suites: they pass on the curated samples and fail, naming the
expectation, the count and examples, on each kind of bad data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sv_dagster.core.data.corpora import load_corpus, resolve_location
from sv_dagster.core.data.corpora.build import CorpusInput, build_dataset
from sv_dagster.core.data.validation import corpus_suite, dataset_suite, proportion_bounds

pytestmark = pytest.mark.usefixtures("offline_sources")


def loaded(spec, value=None):
    return load_corpus(spec, resolve_location(spec, value), cache_dir=Path("/nonexistent"))


def failing(result) -> dict[str, object]:
    return {o.name: o for o in result.failures}


def test_every_bundled_corpus_meets_its_suite(sources):
    for spec in sources.values():
        corpus = loaded(spec)
        result = corpus_suite(spec, corpus.frame, n_malformed=corpus.n_malformed, malformed_examples=corpus.malformed)
        assert result.success, result.summary()
        assert len(result.outcomes) >= 3 and result.n_rows == len(corpus.frame)


def test_labels_outside_the_allowed_set_fail_the_corpus_beyond_its_tolerance(sources):
    spec = sources["iot23"]
    frame = loaded(spec).frame.head(100).copy()
    frame.loc[0, "label"] = "Suspicious"  # 1% unusable: recorded downstream, tolerated here (max 5%)
    assert corpus_suite(spec, frame, n_malformed=0, malformed_examples=[]).success
    frame.loc[:9, "label"] = "Suspicious"  # 10%
    result = corpus_suite(spec, frame, n_malformed=0, malformed_examples=[])
    outcome = failing(result)["corpus.expect_column_values_to_be_null(label_unmapped)"]
    assert outcome.unexpected_count == 10
    assert outcome.examples == [
        f"iot23-preprocessed.sample.jsonl:{n}: label_unmapped='Suspicious'" for n in range(1, 6)
    ]
    assert "map to none of ['Benign', 'Malicious']" in outcome.note
    assert "1 of" in result.summary() and "label_unmapped" in result.markdown()


def test_missing_columns_nulls_and_malformed_rows_fail_the_corpus(sources):
    spec = sources["harmbench"]
    frame = loaded(spec).frame
    result = corpus_suite(spec, frame.drop(columns=["category"]), n_malformed=0, malformed_examples=[])
    assert "corpus.expect_column_to_exist(category)" in failing(result)
    nulls = frame.copy()
    nulls["prompt"] = None
    assert "corpus.expect_column_values_to_not_be_null(prompt)" in failing(
        corpus_suite(spec, nulls, n_malformed=0, malformed_examples=[])
    )
    result = corpus_suite(spec, frame, n_malformed=5, malformed_examples=["x.csv:3: expected 2 fields, got 3"])
    outcome = failing(result)["corpus.malformed_rows_within_limit()"]
    assert outcome.unexpected_count == 5 and outcome.examples == ["x.csv:3: expected 2 fields, got 3"]
    assert (
        corpus_suite(spec, frame.head(0), n_malformed=0, malformed_examples=[]).failures[0].expectation
        == "expect_table_row_count_to_be_between"
    )


@pytest.fixture
def e1_dataset(sources, tmp_path):
    inputs = [CorpusInput(spec, loaded(spec).frame, True) for spec in sources.values() if "e1" in spec.envs]
    build = build_dataset("e1", inputs, tmp_path / "e1")
    files = {name: path for name, path in build.files.items() if name != "rejects"}
    return files, json.loads(json.dumps(build.report))


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def rewrite(path: Path, data: list[dict]) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in data))


def test_the_curated_dataset_meets_its_suite(e1_dataset):
    files, report = e1_dataset
    result = dataset_suite("e1", files, report)
    assert result.success, result.summary()
    names = {o.name for o in result.outcomes}
    assert {
        "tasks.train_dev.expect_column_values_to_be_in_set(in_test_exact)",
        "tasks.train_dev.expect_column_values_to_be_in_set(in_test_normalized)",
        "tasks.expect_column_values_to_be_in_set(label)",
        "tasks.expect_column_values_to_not_be_null(question)",
        "split_dev.expect_table_row_count_to_be_between()",
    } <= names


def test_test_items_in_train_fail_exactly_and_after_normalisation(e1_dataset):
    files, report = e1_dataset
    test_rows, train_rows = rows(files["test"]), rows(files["train"])
    copied = dict(test_rows[0], id="leak-exact")
    recased = dict(test_rows[1], id="leak-near", question=test_rows[1]["question"].upper().replace("\n", "\n  "))
    rewrite(files["train"], [*train_rows, copied, recased])
    result = failing(dataset_suite("e1", files, report))
    exact = result["tasks.train_dev.expect_column_values_to_be_in_set(in_test_exact)"]
    near = result["tasks.train_dev.expect_column_values_to_be_in_set(in_test_normalized)"]
    assert exact.unexpected_count == 1 and exact.examples == ["leak-exact"]
    assert near.unexpected_count == 2 and set(near.examples) == {"leak-exact", "leak-near"}


def test_bad_labels_nulls_duplicate_ids_and_missing_sample_flags_fail(e1_dataset):
    files, report = e1_dataset
    train = rows(files["train"])
    train[0]["answer"] = "Suspicious"
    train[1]["question"] = ""
    train[2]["id"] = train[3]["id"]
    train[4]["info"]["sample"] = False
    rewrite(files["train"], train)
    result = failing(dataset_suite("e1", files, report))
    assert result["tasks.expect_column_values_to_be_in_set(label)"].examples == [train[0]["id"]]
    assert result["tasks.expect_column_values_to_not_be_null(question)"].unexpected_count == 1
    assert result["tasks.expect_column_values_to_be_unique(id)"].unexpected_count == 2
    assert result["tasks.expect_column_values_to_be_in_set(sample)"].examples == [train[4]["id"]]


def test_split_proportions_out_of_tolerance_fail(e1_dataset):
    files, report = e1_dataset
    rewrite(files["train"], rows(files["train"]) + rows(files["dev"]))  # dev emptied into train
    rewrite(files["dev"], [])
    result = failing(dataset_suite("e1", files, report))
    assert set(result) >= {
        "split_dev.expect_table_row_count_to_be_between()",
        "split_train.expect_table_row_count_to_be_between()",
    }
    assert "10% of" in result["split_dev.expect_table_row_count_to_be_between()"].note


def test_proportion_bounds():
    assert proportion_bounds(1_000_000, 0.2) == (180_000, 220_000)  # 2 points: wider than 4 sigma (1,600 rows)
    assert proportion_bounds(40, 0.1) == (0, 12)  # small samples: the 4-sigma binomial band


def test_a_missing_required_field_fails_the_schema(sources, tmp_path):
    inputs = [CorpusInput(spec, loaded(spec).frame, True) for spec in sources.values() if "e3" in spec.envs]
    build = build_dataset("e3", inputs, tmp_path / "e3")
    files = {name: path for name, path in build.files.items() if name != "rejects"}
    report = json.loads(json.dumps(build.report))
    assert dataset_suite("e3", files, report).success
    pairs = rows(files["fix_pairs"])
    rewrite(files["fix_pairs"], [{k: v for k, v in row.items() if k != "after"} for row in pairs])
    result = failing(dataset_suite("e3", files, report))
    assert "fix_pairs.expect_column_to_exist(after)" in result
