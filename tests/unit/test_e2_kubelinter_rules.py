"""E2: the project's Rego versions of KubeLinter's default checks (tool `kubelinter_rego`),
one project-written fixture pair per rule, the tool in the suite and the oracle, and Helm
templates refused per example."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from sv_dagster.core.evals.traces import completion_trace
from sv_env_config_verification import (
    ConfigVerificationTaskset,
    ConfigVerificationTasksetConfig,
    InputError,
    oracle_reply,
)
from sv_env_config_verification.opa import KubeLinterRegoEvaluator, OpaEvaluator
from sv_env_config_verification.tools import DEFAULT_TOOLS, ToolSuite, oracle_index, precheck

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


def test_the_tool_is_opt_in_and_kubernetes_only():
    assert "kubelinter_rego" not in DEFAULT_TOOLS
    default = ToolSuite(cache=None)
    assert "kubelinter_rego" not in default.enabled and "kubelinter_rego" not in default.versions()
    suite = ToolSuite(cache=None, tools=TOOLS)
    assert suite.applicable("a.yaml") == ("opa", "kubelinter_rego") and suite.applicable("a.tf") == ("opa",)
    info = suite.versions()["kubelinter_rego"]
    assert info["available"] and info["version"].startswith("regopy-") and info["ruleset_hash"]
    assert info["ruleset_hash"] != suite.versions()["opa"]["ruleset_hash"]
    result = asyncio.run(suite.run("kubelinter_rego", "main.tf", 'resource "aws_s3_bucket" "b" {}\n'))
    assert result.findings == () and "Kubernetes YAML only" in result.error


@pytest.mark.parametrize("rule", ["no-read-only-root-fs", "dangling-service"])
def test_suite_and_scan_many_report_the_headline_rules(rule):
    text = (FIXTURES / rule / "bad.yaml").read_text(encoding="utf-8")
    suite = ToolSuite(cache=None, tools=TOOLS)
    results = asyncio.run(suite.run_all("app.yaml", text))
    assert set(results) == set(TOOLS) and all(r.error is None for r in results.values())
    assert f"kubelinter_rego/{rule}" in oracle_index(results)
    batch = suite.scan_many({"app.yaml": text})["app.yaml"]
    assert {f.id for f in batch["kubelinter_rego"].findings} == {f.id for f in results["kubelinter_rego"].findings}


def _taskset(tmp_path: Path, files: dict[str, Path]) -> dict:
    dataset = tmp_path / "kl.jsonl"
    rows = [
        {"id": key, "filename": f"{key}.yaml", "content": p.read_text(encoding="utf-8")} for key, p in files.items()
    ]
    dataset.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    config = ConfigVerificationTasksetConfig(dataset_path=dataset, task={"tools": TOOLS})
    return {task.data.id: task for task in ConfigVerificationTaskset(config).load()}


def test_tool_oracle_reports_the_rules_and_patches_the_root_filesystem(tmp_path):
    tasks = _taskset(
        tmp_path,
        {
            "rofs": FIXTURES / "no-read-only-root-fs" / "bad.yaml",
            "dangling": FIXTURES / "dangling-service" / "bad.yaml",
        },
    )
    for key, rule in (("rofs", "no-read-only-root-fs"), ("dangling", "dangling-service")):
        task = tasks[key]
        assert "run_kubelinter_rego" in task.data.prompt_text
        tool_output = json.loads(asyncio.run(task.call_tool("kubelinter_rego")))
        assert f"kubelinter_rego/{rule}" in {f["id"] for f in tool_output["findings"]}
        reply = oracle_reply(task.data.prompt_text, tools=TOOLS)
        assert f"kubelinter_rego/{rule}" in {v["id"] for v in json.loads(reply)["violations"]}
        trace = completion_trace(task, reply)
        asyncio.run(task.score(trace))
        assert trace.rewards["detection"].score == 1.0
        assert f"kubelinter_rego/{rule}" in trace.info["e2"]["oracle"]
        if key == "rofs":  # its JSON patch sets readOnlyRootFilesystem; the re-scan sees it gone
            assert f"kubelinter_rego/{rule}" in trace.info["e2"]["patch"]["removed"]


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


def test_go_template_text_in_a_configmap_is_not_a_helm_template(kl):
    text = (FIXTURES / "go-template-configmap.yaml").read_text(encoding="utf-8")
    assert precheck("cm.yaml", text) is None
    assert OpaEvaluator(cache=None).evaluate("cm.yaml", text).error is None
    assert kl.evaluate("cm.yaml", text).error is None
