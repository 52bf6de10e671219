"""E2: the project's Rego versions of KubeLinter's default checks (tool `kubelinter_rego`),
one project-written fixture pair per rule, the tool on by default in the suite, the oracle
and the rewards (and off when the other tools are named), a blind list of every id not
paying, and Helm templates refused per example."""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from pathlib import Path

import pytest

from sv_dagster.core.envs import ENVS
from sv_dagster.core.evals.evaluation import evaluate
from sv_dagster.core.evals.runner import read_results
from sv_dagster.core.evals.traces import completion_trace
from sv_dagster.core.models.backends import make_backend
from sv_dagster.core.models.registry import ModelSpec
from sv_env_config_verification import (
    ConfigVerificationTaskset,
    ConfigVerificationTasksetConfig,
    InputError,
    heuristic_reply,
    oracle_replies,
    oracle_reply,
)
from sv_env_config_verification.opa import KubeLinterRegoEvaluator, OpaEvaluator
from sv_env_config_verification.tools import (
    DEFAULT_TOOLS,
    ENV_TOOLS,
    ToolSuite,
    default_suite,
    oracle_index,
    precheck,
    tool_versions,
)
from sv_shared.tools import ToolCache

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "e2-kubelinter"
RULE_DIRS = sorted(p for p in FIXTURES.iterdir() if p.is_dir())
BAD = sorted(p for d in RULE_DIRS for p in d.glob("bad*.yaml"))
GOOD = sorted(d / "good.yaml" for d in RULE_DIRS)
TOOLS = ["opa", "kubelinter_rego"]

# KubeLinter v0.8's checks marked "Enabled by default: Yes" in its generated checks list.
KUBELINTER_DEFAULTS = {
    "dangling-service",
    "deprecated-service-account-field",
    "docker-sock",
    "drop-net-raw-capability",
    "duplicate-env-var",
    "env-var-secret",
    "host-ipc",
    "host-network",
    "host-pid",
    "invalid-target-ports",
    "job-ttl-seconds-after-finished",
    "latest-tag",
    "liveness-port",
    "mismatching-selector",
    "no-anti-affinity",
    "no-extensions-v1beta",
    "no-read-only-root-fs",
    "non-existent-service-account",
    "pdb-max-unavailable",
    "pdb-min-available",
    "pdb-unhealthy-pod-eviction-policy",
    "privilege-escalation-container",
    "privileged-container",
    "readiness-port",
    "run-as-non-root",
    "sensitive-host-mounts",
    "ssh-port",
    "startup-port",
    "unsafe-sysctls",
    "unset-cpu-requirements",
    "unset-memory-requirements",
}


@pytest.fixture(scope="module")
def kl() -> KubeLinterRegoEvaluator:
    return KubeLinterRegoEvaluator(cache=None)


def _rel(path: Path) -> str:
    return str(path.relative_to(FIXTURES))


def test_every_default_check_has_a_rule_and_a_fixture_pair(kl):
    catalogue = kl.catalogue()
    assert set(catalogue) == KUBELINTER_DEFAULTS
    assert {d.name for d in RULE_DIRS} == KUBELINTER_DEFAULTS
    assert all((d / "good.yaml").is_file() and any(d.glob("bad*.yaml")) for d in RULE_DIRS)
    assert all(meta["severity"] in {"low", "medium", "high"} and meta["title"] for meta in catalogue.values())


@pytest.mark.parametrize("path", BAD, ids=_rel)
def test_rule_flags_its_bad_fixture(kl, path):
    rule = path.parent.name
    result = kl.evaluate(path.name, path.read_text(encoding="utf-8"))
    assert result.error is None
    hits = [f for f in result.findings if f.rule == rule]
    assert hits, sorted({f.rule for f in result.findings})
    severity = kl.catalogue()[rule]["severity"]
    for finding in hits:
        assert finding.id == f"kubelinter_rego/{rule}" and finding.severity == severity
        assert finding.line is not None and finding.line >= 2 and finding.message


@pytest.mark.parametrize("path", GOOD, ids=_rel)
def test_good_fixture_has_no_finding_at_all(kl, path):
    result = kl.evaluate(path.name, path.read_text(encoding="utf-8"))
    assert result.error is None and result.findings == (), [f.message for f in result.findings]


def test_cross_document_checks_point_at_the_right_document(kl):
    text = (FIXTURES / "dangling-service" / "bad.yaml").read_text(encoding="utf-8")
    # The Service document starts one line above "kind: Service": 1-based, that is its 0-based index.
    service_line = text.splitlines().index("kind: Service")
    result = kl.evaluate("app.yaml", text)
    assert [(f.rule, f.line) for f in result.findings] == [("dangling-service", service_line)]
    assert "api-frontend" in result.findings[0].message


def test_a_reference_without_its_counterpart_in_the_file_is_not_judged(kl):
    """A Service alone (its pods may live in another file) and a pod naming an account the
    file does not try to define are no findings; add the other side and they are."""
    lone_service = (FIXTURES / "dangling-service" / "lone.yaml").read_text(encoding="utf-8")
    assert kl.evaluate("svc.yaml", lone_service).findings == ()
    workload = (FIXTURES / "no-read-only-root-fs" / "good.yaml").read_text(encoding="utf-8")
    both = kl.evaluate("both.yaml", workload + "---\n" + lone_service)
    assert {f.rule for f in both.findings} == {"dangling-service"}

    lone_account = (FIXTURES / "non-existent-service-account" / "lone.yaml").read_text(encoding="utf-8")
    assert kl.evaluate("deploy.yaml", lone_account).findings == ()
    other = "---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: someone-else\n"
    assert {f.rule for f in kl.evaluate("d.yaml", lone_account + other).findings} == {"non-existent-service-account"}


def test_a_selectorless_service_is_dangling_unless_the_file_gives_it_endpoints(kl):
    workload = (FIXTURES / "no-read-only-root-fs" / "good.yaml").read_text(encoding="utf-8")
    service = "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: db\nspec:\n  ports:\n    - port: 5432\n"
    assert {f.rule for f in kl.evaluate("a.yaml", workload + service).findings} == {"dangling-service"}
    endpoints = "---\napiVersion: v1\nkind: Endpoints\nmetadata:\n  name: db\nsubsets: []\n"
    assert kl.evaluate("b.yaml", workload + service + endpoints).findings == ()
    external = service.replace("spec:\n", "spec:\n  type: ExternalName\n  externalName: db.example.com\n")
    assert kl.evaluate("c.yaml", workload + external).findings == ()


def test_ignore_annotations_do_not_silence_a_rule(kl):
    text = (FIXTURES / "no-read-only-root-fs" / "bad.yaml").read_text(encoding="utf-8")
    annotated = text.replace(
        "metadata:\n  name: api\n",
        'metadata:\n  name: api\n  annotations:\n    kube-linter.io/ignore-all: "patched away"\n',
        1,
    )
    assert annotated != text
    assert "no-read-only-root-fs" in {f.rule for f in kl.evaluate("a.yaml", annotated).findings}


def test_odd_but_parseable_documents_do_not_break_the_rules(kl):
    text = (
        "---\n- just\n- a list\n---\nplain text\n---\nkind: Deployment\nspec: null\n"
        "---\nkind: Pod\nspec:\n  containers: [null, 3, {name: x, securityContext: 7, ports: 9}]\n"
    )
    result = kl.evaluate("odd.yaml", text)
    assert result.error is None
    assert {f.rule for f in result.findings} >= {"no-read-only-root-fs", "latest-tag"}
    # Nameless objects and a container without name or image: messages fall back to "?".
    nameless = "kind: Pod\nspec:\n  hostNetwork: true\n  containers: [{}]\n"
    result = kl.evaluate("nameless.yaml", nameless)
    assert result.error is None and "Pod/?: hostNetwork: true" in {f.message for f in result.findings}
    assert "latest-tag" in {f.rule for f in result.findings}


def test_unreadable_regopy_output_is_a_tool_error_not_an_exception():
    """regopy 1.5.2 breaks its own JSON output when sprintf gets a string default of
    object.get (the core policies' resource name of a nameless object): recorded, not raised."""
    result = OpaEvaluator(cache=None).evaluate("p.yaml", "kind: Pod\nspec:\n  hostNetwork: true\n  containers: []\n")
    assert result.error is None or "not valid JSON" in result.error


def test_rules_are_fast_in_process(kl):
    files = [(p.name, p.read_text(encoding="utf-8")) for p in BAD + GOOD]
    kl.evaluate(*files[0])
    start = time.perf_counter()
    for name, text in files:
        kl.evaluate(name, text)
    assert (time.perf_counter() - start) / len(files) < 0.25


def test_the_tool_is_on_by_default_and_kubernetes_only(monkeypatch):
    monkeypatch.delenv(ENV_TOOLS, raising=False)
    assert "kubelinter_rego" in DEFAULT_TOOLS
    default = ToolSuite(cache=None)
    assert "kubelinter_rego" in default.enabled and default.is_available("kubelinter_rego")
    assert "kubelinter_rego" in default.applicable("a.yaml") and "kubelinter_rego" not in default.applicable("a.tf")
    info = default.versions()["kubelinter_rego"]
    assert info["available"] and info["version"].startswith("regopy-") and info["ruleset_hash"]
    assert info["ruleset_hash"] != default.versions()["opa"]["ruleset_hash"]
    # Eval provenance (`tool_versions()`, what metadata.json records) names it like the others.
    assert tool_versions()["kubelinter_rego"] == info
    result = asyncio.run(default.run("kubelinter_rego", "main.tf", 'resource "aws_s3_bucket" "b" {}\n'))
    assert result.findings == () and "Kubernetes YAML only" in result.error


def test_its_results_are_cached_under_its_own_version_and_rule_set_hash(tmp_path):
    cache = ToolCache(tmp_path / "tools")
    suite = ToolSuite(cache=cache)
    text = (FIXTURES / "no-read-only-root-fs" / "bad.yaml").read_text(encoding="utf-8")
    first = asyncio.run(suite.run("kubelinter_rego", "app.yaml", text))
    info = suite.versions()["kubelinter_rego"]
    hit = cache.lookup("kubelinter_rego", info["version"], info["ruleset_hash"], ".yaml", text)
    assert hit is not None and hit.ids == first.ids and "kubelinter_rego/no-read-only-root-fs" in hit.ids
    # Another rule set (any .rego edit) is another key: the stored result is not reused.
    assert cache.lookup("kubelinter_rego", info["version"], "another-rule-set", ".yaml", text) is None


def test_naming_the_other_tools_turns_it_off(monkeypatch, tmp_path):
    others = ("opa", "semgrep", "checkov", "kubelinter")
    suite = ToolSuite(cache=None, tools=others)
    assert "kubelinter_rego" not in suite.enabled and "kubelinter_rego" not in suite.applicable("a.yaml")
    assert suite.versions()["kubelinter_rego"] == {"available": False, "version": "disabled", "ruleset_hash": None}
    monkeypatch.setenv(ENV_TOOLS, ",".join(others))
    assert "kubelinter_rego" not in default_suite().enabled
    tasks = _taskset(tmp_path, {"rofs": FIXTURES / "no-read-only-root-fs" / "bad.yaml"}, tools=None)
    prompt = tasks["rofs"].data.prompt_text
    assert "run_opa" in prompt and "run_kubelinter_rego" not in prompt
    assert "kubelinter_rego" not in tasks["rofs"].tool_names


@pytest.mark.parametrize("rule", ["no-read-only-root-fs", "dangling-service"])
def test_suite_and_scan_many_report_the_headline_rules(rule):
    text = (FIXTURES / rule / "bad.yaml").read_text(encoding="utf-8")
    suite = ToolSuite(cache=None, tools=TOOLS)
    results = asyncio.run(suite.run_all("app.yaml", text))
    assert set(results) == set(TOOLS) and all(r.error is None for r in results.values())
    assert f"kubelinter_rego/{rule}" in oracle_index(results)
    batch = suite.scan_many({"app.yaml": text})["app.yaml"]
    assert {f.id for f in batch["kubelinter_rego"].findings} == {f.id for f in results["kubelinter_rego"].findings}


def _dataset(tmp_path: Path, files: dict[str, Path]) -> Path:
    dataset = tmp_path / "kl.jsonl"
    rows = [
        {"id": key, "filename": f"{key}.yaml", "content": p.read_text(encoding="utf-8")} for key, p in files.items()
    ]
    dataset.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return dataset


def _taskset(tmp_path: Path, files: dict[str, Path], tools: list[str] | None = TOOLS) -> dict:
    """Tasks for `files` with `tools` (None: the task config's default, $SV_E2_TOOLS or all)."""
    config = ConfigVerificationTasksetConfig(dataset_path=_dataset(tmp_path, files), task={"tools": tools})
    return {task.data.id: task for task in ConfigVerificationTaskset(config).load()}


# Rules whose finding the oracle's JSON patch removes (the re-scan sees it gone); a dangling
# Service needs a human (which pods should it select?).
ORACLE_FIXES = ("no-read-only-root-fs", "no-anti-affinity", "job-ttl-seconds-after-finished")


def test_tool_oracle_reports_the_rules_and_patches_what_it_can(tmp_path):
    rules = (*ORACLE_FIXES, "dangling-service")
    tasks = _taskset(tmp_path, {rule: FIXTURES / rule / "bad.yaml" for rule in rules})
    for rule in rules:
        task = tasks[rule]
        assert "run_kubelinter_rego" in task.data.prompt_text
        tool_output = json.loads(asyncio.run(task.call_tool("kubelinter_rego")))
        assert f"kubelinter_rego/{rule}" in {f["id"] for f in tool_output["findings"]}
        reply = oracle_reply(task.data.prompt_text, tools=TOOLS)
        assert f"kubelinter_rego/{rule}" in {v["id"] for v in json.loads(reply)["violations"]}
        trace = completion_trace(task, reply)
        asyncio.run(task.score(trace))
        assert trace.rewards["detection"].score == 1.0
        assert f"kubelinter_rego/{rule}" in trace.info["e2"]["oracle"]
        patch = trace.info["e2"]["patch"]
        assert (f"kubelinter_rego/{rule}" in patch["removed"]) is (rule in ORACLE_FIXES), (rule, patch)
        assert patch["introduced"] == [], (rule, patch)


def test_the_oracle_never_overwrites_an_anti_affinity_the_file_has(tmp_path):
    """A podAntiAffinity on the wrong topology key is still a finding, left for a human."""
    tasks = _taskset(tmp_path, {"topology": FIXTURES / "no-anti-affinity" / "bad-topology.yaml"})
    reply = json.loads(oracle_reply(tasks["topology"].data.prompt_text, tools=TOOLS))
    assert "kubelinter_rego/no-anti-affinity" in {v["id"] for v in reply["violations"]}
    assert not any(op["path"].endswith("/affinity") for op in reply["patch"] or [])


HELM = ["helm-deployment.yaml", "helm-control-block.yaml"]


@pytest.mark.parametrize("name", HELM)
def test_helm_templates_are_refused_by_every_tool_with_a_named_error(name):
    text = (FIXTURES / name).read_text(encoding="utf-8")
    for evaluator in (OpaEvaluator(cache=None), KubeLinterRegoEvaluator(cache=None)):
        result = evaluator.evaluate(name, text)
        assert result.findings == () and result.error.startswith(f"{name}: Helm template")
        assert "line " in result.error and "\n" not in result.error
    assert precheck(name, text).startswith(f"{name}: Helm template")


def test_a_helm_example_is_an_error_that_names_it(tmp_path):
    tasks = _taskset(tmp_path, {"chart": FIXTURES / "helm-deployment.yaml"})
    task = tasks["chart"]
    with pytest.raises(InputError, match=r"chart \(chart\.yaml\).*Helm template .*line 5"):
        asyncio.run(task.verify('{"violations": [], "patch": "", "confidence": 0.5}'))


def test_a_helm_example_in_an_eval_is_one_error_row_and_the_others_are_scored(tmp_path, monkeypatch):
    """With the default tools, through the pipeline's eval and the tool-calling oracle: the
    chart's row is an error saying it is an unrendered Helm template; the manifests beside
    it are scored, their oracle and the oracle's grounding include kubelinter_rego."""
    monkeypatch.delenv(ENV_TOOLS, raising=False)
    dataset = _dataset(
        tmp_path,
        {
            "rofs": FIXTURES / "no-read-only-root-fs" / "bad.yaml",
            "chart": FIXTURES / "helm-deployment.yaml",
            "dangling": FIXTURES / "dangling-service" / "bad.yaml",
        },
    )
    env = ENVS["e2"]
    spec = ModelSpec(name="oracle", backend="oracle", model="oracle")
    run = evaluate(
        env,
        spec,
        make_backend(spec, env.env_id),
        dataset_path=dataset,
        outputs_root=tmp_path / "outputs",
        run_id="helm",
        counterpart=None,
        counterpart_model=None,
    )
    rows = {row["example_id"]: row for row in read_results(run.results_path)}
    chart = rows["chart"]
    assert chart["reward"] is None and chart["error_kind"] == "scoring" and "\n" not in chart["error"]
    assert "chart (chart.yaml): no tool could scan the file: chart.yaml: Helm template" in chart["error"]
    assert "line 5" in chart["error"] and "render it with `helm template`" in chart["error"]
    for key, rule in (("rofs", "no-read-only-root-fs"), ("dangling", "dangling-service")):
        row = rows[key]
        assert row["error"] is None and row["reward"] is not None, row["error"]
        assert row["rewards"]["detection"] == 1.0 and row["rewards"]["grounding"] == 1.0
        assert f"kubelinter_rego/{rule}" in row["details"]["oracle"]
        assert row["details"]["tools"]["kubelinter_rego"]["error"] is None
    assert run.metadata["tools"]["kubelinter_rego"]["available"] is True
    assert run.metadata["counts"]["n_scored"] == 2 and run.metadata["counts"]["n_scoring_errors"] == 1


def _blind(ids: dict[str, str]) -> str:
    violations = [{"id": vid, "severity": severity} for vid, severity in sorted(ids.items())]
    return json.dumps({"violations": violations, "patch": "", "confidence": 0.9})


def _total(task, reply: str) -> float:
    trace = completion_trace(task, reply)
    asyncio.run(task.score(trace))
    return trace.reward


def test_naming_every_rule_id_blindly_scores_far_below_the_oracle(kl, monkeypatch):
    """KubeLinter's checks flag hygiene on nearly every workload, so some of its ids are
    right on almost any manifest. A reply naming every Kubernetes rule id of both Rego rule
    sets on every bundled manifest, without tools, must still lose to the oracle's findings
    (even without the oracle's patch) on every example, and to the no-tools heuristic on
    average: the false positives cost more precision than the hits earn recall. Claiming
    every id as "low" (a false positive costs the severity the reply claims) does not help."""
    monkeypatch.delenv(ENV_TOOLS, raising=False)
    config = ConfigVerificationTasksetConfig()
    tasks = [task for task in ConfigVerificationTaskset(config).load() if task.data.kind == "kubernetes"]
    assert len(tasks) >= 15 and all("run_kubelinter_rego" in task.data.prompt_text for task in tasks)
    # One Semgrep and one Checkov process for all files; scoring then reads the tool cache.
    oracle = [json.loads(reply) for reply in oracle_replies([task.data.prompt_text for task in tasks])]
    catalogue = {f"kubelinter_rego/{rule}": meta["severity"] for rule, meta in kl.catalogue().items()}
    catalogue |= {
        f"opa/{rule}": meta["severity"]
        for rule, meta in OpaEvaluator(cache=None).catalogue().items()
        if meta["kind"] == "kubernetes"
    }
    everything = _blind(catalogue)
    everything_low = _blind(dict.fromkeys(catalogue, "low"))
    totals: dict[str, list[float]] = {"oracle": [], "heuristic": [], "all": [], "all_low": []}
    # The premise: kubelinter_rego flags most of them (all but the clean files and RBAC-only ones).
    flagged = [any(v["id"].startswith("kubelinter_rego/") for v in answer["violations"]) for answer in oracle]
    assert sum(flagged) > len(tasks) / 2, flagged
    for task, answer in zip(tasks, oracle):
        totals["oracle"].append(_total(task, json.dumps({**answer, "patch": ""})))
        totals["heuristic"].append(_total(task, heuristic_reply(task.data.prompt_text)))
        totals["all"].append(_total(task, everything))
        totals["all_low"].append(_total(task, everything_low))
    means = {name: statistics.mean(values) for name, values in totals.items()}
    for name in ("all", "all_low"):
        assert all(b < o for b, o in zip(totals[name], totals["oracle"])), (name, totals[name], totals["oracle"])
        assert means[name] < means["heuristic"] < means["oracle"], means
        assert means[name] < 0.5 * means["oracle"], means


def test_go_template_text_in_a_configmap_is_not_a_helm_template(kl):
    text = (FIXTURES / "go-template-configmap.yaml").read_text(encoding="utf-8")
    assert precheck("cm.yaml", text) is None
    assert OpaEvaluator(cache=None).evaluate("cm.yaml", text).error is None
    assert kl.evaluate("cm.yaml", text).error is None
