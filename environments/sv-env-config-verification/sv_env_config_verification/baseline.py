"""Two baselines that see exactly what a model sees (the rendered prompt).

`heuristic_reply` is the no-tools baseline (label "heuristic"): fixed Python checks on the
parsed YAML/HCL, written independently of the Rego policies but answering with their ids.
`oracle_reply` runs the tools on the file in the prompt and answers with their findings,
plus a JSON patch for the Kubernetes findings it knows how to fix.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Collection, Iterator
from typing import Any

from sv_env_config_verification.inputs import InputError, file_kind, load_terraform, load_yaml_documents
from sv_env_config_verification.prompts import parse_prompt

BASELINE_LABEL = "heuristic"
_SEVERITY = {
    "k8s-privileged-container": "high",
    "k8s-host-network": "high",
    "k8s-host-pid": "high",
    "k8s-host-ipc": "high",
    "k8s-host-path-volume": "high",
    "k8s-rbac-wildcard": "high",
    "k8s-run-as-root": "medium",
    "k8s-allow-privilege-escalation": "medium",
    "k8s-image-not-pinned": "medium",
    "k8s-no-resource-limits": "low",
    "tf-s3-public-acl": "high",
    "tf-s3-public-access-block-disabled": "high",
    "tf-s3-unencrypted": "medium",
    "tf-ebs-unencrypted": "medium",
    "tf-rds-unencrypted": "high",
    "tf-sg-open-ssh": "high",
    "tf-sg-open-rdp": "high",
    "tf-iam-wildcard-action": "high",
}
_WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "ReplicationController"}


def _pod_spec(doc: dict) -> dict | None:
    kind, spec = doc.get("kind"), doc.get("spec") or {}
    if not isinstance(spec, dict):
        return None
    if kind == "Pod":
        return spec
    if kind in _WORKLOADS:
        return ((spec.get("template") or {}).get("spec")) or None
    if kind == "CronJob":
        return ((((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}).get("spec")) or None
    return None


def _containers(pod: dict) -> Iterator[dict]:
    for key in ("containers", "initContainers"):
        for c in pod.get(key) or []:
            if isinstance(c, dict):
                yield c


def _k8s_rules(doc: Any) -> set[str]:
    found: set[str] = set()
    if not isinstance(doc, dict):
        return found
    if doc.get("kind") in {"Role", "ClusterRole"}:
        for rule in doc.get("rules") or []:
            if isinstance(rule, dict) and ("*" in (rule.get("verbs") or []) or "*" in (rule.get("resources") or [])):
                found.add("k8s-rbac-wildcard")
    pod = _pod_spec(doc)
    if not isinstance(pod, dict):
        return found
    for key, rule in (("hostNetwork", "k8s-host-network"), ("hostPID", "k8s-host-pid"), ("hostIPC", "k8s-host-ipc")):
        if pod.get(key) is True:
            found.add(rule)
    if any(isinstance(v, dict) and "hostPath" in v for v in pod.get("volumes") or []):
        found.add("k8s-host-path-volume")
    pod_sc = pod.get("securityContext") or {}
    for c in _containers(pod):
        sc = c.get("securityContext") or {}
        if sc.get("privileged") is True:
            found.add("k8s-privileged-container")
        if sc.get("allowPrivilegeEscalation", pod_sc.get("allowPrivilegeEscalation")) is not False:
            found.add("k8s-allow-privilege-escalation")
        user = sc.get("runAsUser", pod_sc.get("runAsUser"))
        if user == 0 or sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is not True:
            found.add("k8s-run-as-root")
        image = str(c.get("image", ""))
        if "@" not in image and (image.endswith(":latest") or ":" not in image.rsplit("/", 1)[-1]):
            found.add("k8s-image-not-pinned")
        limits = (c.get("resources") or {}).get("limits") or {}
        if "cpu" not in limits or "memory" not in limits:
            found.add("k8s-no-resource-limits")
    return found


def _as_list(value: Any) -> list:
    return value if isinstance(value, list) else [value] if isinstance(value, dict) else []


def _tf_rules(tf: dict) -> set[str]:
    found: set[str] = set()
    resources = tf["resources"]
    types = {r["type"] for r in resources}
    for r in resources:
        t, c = r["type"], r["config"] if isinstance(r["config"], dict) else {}
        if t in {"aws_s3_bucket", "aws_s3_bucket_acl"} and c.get("acl") in {
            "public-read",
            "public-read-write",
            "authenticated-read",
        }:
            found.add("tf-s3-public-acl")
        if t == "aws_s3_bucket_public_access_block" and any(
            c.get(k) is not True
            for k in ("block_public_acls", "block_public_policy", "ignore_public_acls", "restrict_public_buckets")
        ):
            found.add("tf-s3-public-access-block-disabled")
        if (
            t == "aws_s3_bucket"
            and "server_side_encryption_configuration" not in c
            and "aws_s3_bucket_server_side_encryption_configuration" not in types
        ):
            found.add("tf-s3-unencrypted")
        if t == "aws_ebs_volume" and c.get("encrypted") is not True:
            found.add("tf-ebs-unencrypted")
        if t in {"aws_db_instance", "aws_rds_cluster"} and c.get("storage_encrypted") is not True:
            found.add("tf-rds-unencrypted")
        rules = (
            _as_list(c.get("ingress"))
            if t == "aws_security_group"
            else [c]
            if (t == "aws_security_group_rule" and c.get("type") == "ingress")
            else []
        )
        for rule in rules:
            if "0.0.0.0/0" not in (rule.get("cidr_blocks") or []):
                continue
            try:
                low, high = int(rule.get("from_port", 0)), int(rule.get("to_port", 0))
            except (TypeError, ValueError):
                continue
            everything = str(rule.get("protocol")) in {"-1", "all"}
            if everything or low <= 22 <= high:
                found.add("tf-sg-open-ssh")
            if everything or low <= 3389 <= high:
                found.add("tf-sg-open-rdp")
        if (
            t.startswith("aws_iam_")
            and t.endswith("policy")
            and isinstance(c.get("policy"), str)
            and re.search(r'(^|[^A-Za-z])"?Action"?\s*[=:]\s*(\[[^\]]*)?"\*"', c["policy"])
        ):
            found.add("tf-iam-wildcard-action")
    for d in tf["data"]:
        if d["type"] == "aws_iam_policy_document":
            for s in _as_list((d["config"] or {}).get("statement")):
                if s.get("effect", "Allow") == "Allow" and "*" in (s.get("actions") or []):
                    found.add("tf-iam-wildcard-action")
    return found


def heuristic_violations(filename: str, content: str) -> list[str]:
    """OPA-style rule ids ("opa/<rule>") the fixed checks flag; [] when the file won't parse."""
    try:
        if file_kind(filename) == "kubernetes":
            rules = set().union(*(_k8s_rules(doc.value) for doc in load_yaml_documents(content)))
        else:
            rules = _tf_rules(load_terraform(content))
    except InputError:
        return []
    return sorted(f"opa/{rule}" for rule in rules)


def _reply(violations: list[dict[str, str]], patch: Any, confidence: float, rationale: str) -> str:
    return json.dumps({"violations": violations, "patch": patch, "confidence": confidence, "rationale": rationale})


def heuristic_reply(prompt: str) -> str:
    """The no-tools baseline's completion for a rendered E2 prompt (JSON text)."""
    parsed = parse_prompt(prompt)
    if parsed is None:
        return _reply([], "", 0.1, "no file found in the prompt")
    ids = heuristic_violations(*parsed)
    violations = [{"id": vid, "severity": _SEVERITY.get(vid.split("/", 1)[1], "medium")} for vid in ids]
    return _reply(violations, "", 0.6, f"{BASELINE_LABEL}: fixed checks on the parsed file")


# --- oracle ----------------------------------------------------------------------------

_HARDENED_CONTAINER = {"allowPrivilegeEscalation": False, "privileged": False}
_REPLICATED = {"Deployment", "StatefulSet", "ReplicaSet", "ReplicationController"}
_JOB_TTL_S = 86400


def _spread_over_nodes(labels: dict) -> dict[str, Any]:
    """A preferred podAntiAffinity term keeping a workload's own replicas on separate nodes."""
    term = {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": dict(labels)}}
    return {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": term}]}


def _scheduling_fix(kind: Any, spec: dict, pod: dict, base: str, kubelinter: Collection[str]) -> list[dict[str, Any]]:
    """Anti-affinity for a workload with several replicas and none, keyed on its own pod
    labels; a podAntiAffinity the file already has is never overwritten."""
    replicas, affinity = spec.get("replicas", 1), pod.get("affinity") or {}
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels")
    if not (
        "no-anti-affinity" in kubelinter
        and kind in _REPLICATED
        and isinstance(replicas, int)
        and replicas >= 2
        and isinstance(affinity, dict)
        and not affinity.get("podAntiAffinity")
        and isinstance(labels, dict)
        and labels
    ):
        return []
    return [
        {"op": "add", "path": f"{base}/affinity", "value": {**affinity, "podAntiAffinity": _spread_over_nodes(labels)}}
    ]


def kubernetes_fix(content: str, rules: set[str], kubelinter: Collection[str] = ()) -> list[dict[str, Any]]:
    """A JSON patch fixing the findings it can (privileged, escalation, root, host
    namespaces, limits; of `kubelinter`, the kubelinter_rego rule ids, a writable root
    filesystem, a missing CPU request or memory limit, replicas without anti-affinity, a
    Job never cleaned up); image tags, hostPath and RBAC need a human and are left alone."""
    try:
        documents = load_yaml_documents(content)
    except InputError:
        return []
    multi = len(documents) > 1
    ops: list[dict[str, Any]] = []
    for position, doc in enumerate(documents):
        value = doc.value
        if not isinstance(value, dict) or (pod_spec := _pod_spec(value)) is None:
            continue
        kind = value.get("kind")
        prefix = f"/{position}" if multi else ""
        if kind == "Pod":
            base = f"{prefix}/spec"
        elif kind == "CronJob":
            base = f"{prefix}/spec/jobTemplate/spec/template/spec"
        else:
            base = f"{prefix}/spec/template/spec"
        pod = copy.deepcopy(pod_spec)
        spec = value["spec"]  # a dict: _pod_spec found a pod spec in it
        ops += _scheduling_fix(kind, spec, pod, base, kubelinter)
        if (
            "job-ttl-seconds-after-finished" in kubelinter
            and kind == "Job"
            and spec.get("ttlSecondsAfterFinished") is None
        ):
            ops.append({"op": "add", "path": f"{prefix}/spec/ttlSecondsAfterFinished", "value": _JOB_TTL_S})
        for key, rule in (
            ("hostNetwork", "k8s-host-network"),
            ("hostPID", "k8s-host-pid"),
            ("hostIPC", "k8s-host-ipc"),
        ):
            if rule in rules and pod.get(key) is True:
                ops.append({"op": "replace", "path": f"{base}/{key}", "value": False})
        if "k8s-run-as-root" in rules:
            pod_sc = dict(pod.get("securityContext") or {})
            pod_sc.update(runAsNonRoot=True, runAsUser=10001)
            ops.append({"op": "add", "path": f"{base}/securityContext", "value": pod_sc})
        for key in ("containers", "initContainers"):
            for i, c in enumerate(pod.get(key) or []):
                if not isinstance(c, dict):
                    continue
                sc = dict(c.get("securityContext") or {})
                if "k8s-privileged-container" in rules or "k8s-allow-privilege-escalation" in rules:
                    sc.update(_HARDENED_CONTAINER)
                if "k8s-run-as-root" in rules:
                    sc.pop("runAsUser", None) if sc.get("runAsUser") == 0 else None
                    sc.pop("runAsNonRoot", None)
                if "no-read-only-root-fs" in kubelinter:
                    sc["readOnlyRootFilesystem"] = True
                if sc != (c.get("securityContext") or {}):
                    ops.append({"op": "add", "path": f"{base}/{key}/{i}/securityContext", "value": sc})
                resources = dict(c.get("resources") or {})
                limits = resources.get("limits") or {}
                if "k8s-no-resource-limits" in rules and ("cpu" not in limits or "memory" not in limits):
                    resources["limits"] = {"cpu": "500m", "memory": "256Mi", **limits}
                if "unset-memory-requirements" in kubelinter and not (resources.get("limits") or {}).get("memory"):
                    resources["limits"] = {**(resources.get("limits") or {}), "memory": "256Mi"}
                if "unset-cpu-requirements" in kubelinter and not (resources.get("requests") or {}).get("cpu"):
                    resources["requests"] = {**(resources.get("requests") or {}), "cpu": "100m"}
                if resources != (c.get("resources") or {}):
                    ops.append({"op": "add", "path": f"{base}/{key}/{i}/resources", "value": resources})
    return ops


def _oracle_answer(filename: str, content: str, results: dict[str, Any]) -> str:
    from sv_env_config_verification.tools import oracle_index

    index = oracle_index(results)
    violations = [{"id": vid, "severity": sev} for vid, sev in sorted(index.items())]
    patch: Any = ""
    if file_kind(filename) == "kubernetes":
        opa_rules = {vid.split("/", 1)[1] for vid in index if vid.startswith("opa/")}
        kubelinter = {vid.split("/", 1)[1] for vid in index if vid.startswith("kubelinter_rego/")}
        patch = kubernetes_fix(content, opa_rules, kubelinter) or ""
    errors = sorted(f"{t}: {r.error}" for t, r in results.items() if r.error)
    rationale = "oracle: " + ", ".join(sorted(results)) + (f"; errors: {errors}" if errors else "")
    return _reply(violations, patch, 0.9 if not errors else 0.5, rationale)


def oracle_reply(prompt: str, tools: list[str] | None = None) -> str:
    """The tools' own answer for the file in the prompt: every finding, and a JSON patch for
    Kubernetes findings `kubernetes_fix` can fix. Runs the tools (through the cache)."""
    parsed = parse_prompt(prompt)
    if parsed is None:
        return _reply([], "", 0.1, "no file found in the prompt")
    filename, content = parsed
    return _oracle_answer(filename, content, _scan_one(filename, content, tools))


def _scan_one(filename: str, content: str, tools: list[str] | None) -> dict[str, Any]:
    import asyncio

    from sv_env_config_verification.tools import default_suite

    suite = default_suite(tools)
    if _loop_running():
        return suite.scan_many({filename: content}).get(filename, {})
    return asyncio.run(suite.run_all(filename, content))


def oracle_replies(prompts: list[str], tools: list[str] | None = None) -> list[str]:
    """`oracle_reply` for many prompts at once: each CLI tool scans every file in one
    process (SFT targets for a whole dataset cost one Semgrep and one Checkov start)."""
    return [reply for reply, _ in oracle_scans(prompts, tools)]


def oracle_scans(prompts: list[str], tools: list[str] | None = None) -> list[tuple[str, dict[str, Any]]]:
    """For each prompt, the oracle's reply and the tool results it rests on ({tool: result}
    for the file in the prompt; empty when there is none), batched as `oracle_replies`."""
    from sv_env_config_verification.tools import default_suite

    parsed = [parse_prompt(prompt) for prompt in prompts]
    files = {found[0]: found[1] for found in parsed if found is not None}
    if len(files) < sum(found is not None for found in parsed):  # two prompts, one file name
        by_prompt = [{} if found is None else _scan_one(found[0], found[1], tools) for found in parsed]
    else:
        scanned = default_suite(tools).scan_many(files) if files else {}
        by_prompt = [{} if found is None else scanned.get(found[0], {}) for found in parsed]
    return [
        (_reply([], "", 0.1, "no file found in the prompt"), {})
        if found is None
        else (_oracle_answer(found[0], found[1], results), results)
        for found, results in zip(parsed, by_prompt)
    ]


def _loop_running() -> bool:
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
