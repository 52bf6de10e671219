"""Synthetic E2 examples: secure configs mutated into vulnerable variants, labelled by the tools.

A clean seed (a bundled clean manifest or Terraform file, a clean row of a dataset, or one
of the small hardened templates below) is renamed (so no two rows share names) and one
mutation operator turns it vulnerable: privileged, hostNetwork, hostPID, runAsRoot,
allowPrivilegeEscalation, hostPath, unpinned image, no limits, RBAC wildcards; disabled
encryption (EBS, RDS, S3), public ACLs, public access block off, open SSH/RDP ingress, IAM
wildcard actions. The pair (vulnerable -> fixed) is kept with its unified diff.

Labels are never taken on trust: `label_pairs` runs E2's own tools (OPA and KubeLinter's
default checks as Rego in-process, Semgrep and Checkov batched, one process per tool for the
whole batch) on both files. A pair stands
when the vulnerable file triggers the Rego rule the operator targets and the fixed file has
no finding from any tool; `expected` then records every tool's findings on the vulnerable
file. Clean rows (renamed seeds) stand when no tool flags them.
"""

from __future__ import annotations

import copy
import difflib
import json
import random
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from sv_env_config_verification.dataset import bundled_examples, read_examples
from sv_env_config_verification.inputs import InputError, file_kind, load_terraform, load_yaml_documents

GENERATOR_ID = "sv-env-config-verification/synthetic"
GENERATOR_VERSION = "2"
"""2: the Kubernetes templates also pass KubeLinter's default checks (a default tool now)."""

# Small hardened templates beside the bundled clean files (more shapes to mutate). A clean
# seed must pass every default tool, `kubelinter_rego` included: CPU requests, a read-only
# root filesystem and, with several replicas, pod anti-affinity.
TEMPLATES: dict[str, str] = {
    "statefulset.yaml": """apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: ledger
spec:
  serviceName: ledger
  replicas: 2
  selector:
    matchLabels:
      app: ledger
  template:
    metadata:
      labels:
        app: ledger
    spec:
      affinity:
        podAntiAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
            - weight: 100
              podAffinityTerm:
                topologyKey: kubernetes.io/hostname
                labelSelector:
                  matchLabels:
                    app: ledger
      securityContext:
        runAsNonRoot: true
        runAsUser: 10001
      containers:
        - name: ledger
          image: registry.example.com/ledger:3.1.4
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
          resources:
            requests:
              cpu: 100m
            limits:
              cpu: 250m
              memory: 256Mi
""",
    "daemonset.yaml": """apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: node-metrics
spec:
  selector:
    matchLabels:
      app: node-metrics
  template:
    metadata:
      labels:
        app: node-metrics
    spec:
      securityContext:
        runAsNonRoot: true
        runAsUser: 65534
      containers:
        - name: exporter
          image: example/node-metrics:0.9.2
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
          resources:
            requests:
              cpu: 20m
            limits:
              cpu: 100m
              memory: 64Mi
""",
    "clusterrole.yaml": """apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: pod-reader
rules:
  - apiGroups: [""]
    resources: ["pods", "pods/log"]
    verbs: ["get", "list", "watch"]
""",
    "worker-pod.yaml": """apiVersion: v1
kind: Pod
metadata:
  name: thumbnailer
spec:
  securityContext:
    runAsNonRoot: true
    runAsUser: 20001
  containers:
    - name: thumbnailer
      image: registry.example.com/thumbnailer:2.2.0
      securityContext:
        allowPrivilegeEscalation: false
        readOnlyRootFilesystem: true
      resources:
        requests:
          cpu: 100m
        limits:
          cpu: 300m
          memory: 192Mi
""",
    "nightly-cronjob.yaml": """apiVersion: batch/v1
kind: CronJob
metadata:
  name: vacuum
spec:
  schedule: "0 2 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          securityContext:
            runAsNonRoot: true
            runAsUser: 10002
          containers:
            - name: vacuum
              image: example/db-tools:5.0.3
              securityContext:
                allowPrivilegeEscalation: false
                readOnlyRootFilesystem: true
              resources:
                requests:
                  cpu: 50m
                limits:
                  cpu: 100m
                  memory: 128Mi
""",
    "namespace-role.yaml": """apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: deploy-bot
  namespace: apps
rules:
  - apiGroups: ["apps"]
    resources: ["deployments"]
    verbs: ["get", "list", "patch"]
""",
    "volume-policy.tf": """resource "aws_ebs_volume" "scratch" {
  availability_zone = "us-east-1b"
  size              = 50
  encrypted         = true
}

resource "aws_iam_policy" "scratch_reader" {
  name = "scratch-reader"
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [
      {
        Effect   = "Allow"
        Action   = ["ec2:DescribeVolumes"]
        Resource = "*"
      }
    ]
  })
}
""",
    "office-ssh.tf": """resource "aws_security_group" "build" {
  name   = "build"
  vpc_id = "vpc-0a1b2c3d4e5f60718"

  ingress {
    description = "ssh from the office"
    from_port   = 22
    to_port     = 22
    protocol    = "tcp"
    cidr_blocks = ["192.168.0.0/16"]
  }
}
""",
    "bucket-block.tf": """resource "aws_s3_bucket" "logs" {
  bucket = "example-logs"
}

resource "aws_s3_bucket_server_side_encryption_configuration" "logs" {
  bucket = aws_s3_bucket.logs.id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm = "aws:kms"
    }
  }
}

resource "aws_s3_bucket_public_access_block" "logs" {
  bucket                  = aws_s3_bucket.logs.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}
""",
    "rdp-vpn.tf": """resource "aws_security_group" "jump" {
  name   = "jump"
  vpc_id = "vpc-0fedcba9876543210"

  ingress {
    description = "rdp from the vpn"
    from_port   = 3389
    to_port     = 3389
    protocol    = "tcp"
    cidr_blocks = ["172.16.0.0/12"]
  }
}
""",
    "aurora.tf": """resource "aws_rds_cluster" "orders" {
  cluster_identifier = "orders"
  engine             = "aurora-postgresql"
  master_username    = "orders"
  master_password    = var.orders_password
  storage_encrypted  = true
}

variable "orders_password" {
  type      = string
  sensitive = true
}
""",
    "bucket-acl.tf": """resource "aws_s3_bucket" "assets" {
  bucket = "example-assets"
}

resource "aws_s3_bucket_server_side_encryption_configuration" "assets" {
  bucket = aws_s3_bucket.assets.id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm = "aws:kms"
    }
  }
}

resource "aws_s3_bucket_acl" "assets" {
  bucket = aws_s3_bucket.assets.id
  acl    = "private"
}
""",
}


@dataclass(frozen=True)
class Seed:
    id: str
    filename: str
    content: str
    source: str
    """Where it came from: `bundled:<id>`, `template:<name>` or `<file>:<line>`."""


@dataclass(frozen=True)
class Mutation:
    name: str
    kind: str
    """kubernetes | terraform"""
    target: str
    """The OPA rule id (`opa/<rule>`) the vulnerable file must trigger."""
    semgrep: str | None
    """The project's Semgrep rule for the same weakness, where it has one."""
    apply: Callable[[Any, random.Random], Any]
    """Parsed documents (Kubernetes) or text (Terraform) -> mutated, or None when the
    operator does not apply to this seed."""


# -- Kubernetes operators (on parsed documents) -----------------------------------------------

_WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}


def _pod_specs(docs: list[Any]) -> list[dict]:
    specs = []
    for doc in docs:
        if not isinstance(doc, dict):
            continue
        kind = doc.get("kind")
        spec = doc.get("spec") or {}
        if kind == "Pod":
            specs.append(spec)
        elif kind in _WORKLOADS:
            specs.append(((spec.get("template") or {}).get("spec")) or {})
        elif kind == "CronJob":
            specs.append((((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}).get("spec") or {})
    return [s for s in specs if s.get("containers")]


def _on_pod(fn: Callable[[dict, random.Random], None]) -> Callable[[list[Any], random.Random], list[Any] | None]:
    def apply(docs: list[Any], rng: random.Random) -> list[Any] | None:
        docs = copy.deepcopy(docs)
        specs = _pod_specs(docs)
        if not specs:
            return None
        fn(rng.choice(specs), rng)
        return docs

    return apply


def _container(spec: dict, rng: random.Random) -> dict:
    return rng.choice(spec["containers"])


def _privileged(spec, rng):
    _container(spec, rng).setdefault("securityContext", {})["privileged"] = True


def _host_network(spec, rng):
    spec["hostNetwork"] = True


def _host_pid(spec, rng):
    spec["hostPID"] = True


def _run_as_root(spec, rng):
    context = spec.setdefault("securityContext", {})
    context.pop("runAsNonRoot", None)
    context["runAsUser"] = 0


def _privilege_escalation(spec, rng):
    _container(spec, rng).setdefault("securityContext", {})["allowPrivilegeEscalation"] = True


def _host_path(spec, rng):
    path = rng.choice(["/var/run/docker.sock", "/etc", "/var/lib/kubelet", "/"])
    spec.setdefault("volumes", []).append({"name": "host", "hostPath": {"path": path}})
    _container(spec, rng).setdefault("volumeMounts", []).append({"name": "host", "mountPath": "/host"})


def _latest_image(spec, rng):
    container = _container(spec, rng)
    image = str(container.get("image", "example/app"))
    base = image.split("@", 1)[0]
    name = base.rsplit(":", 1)[0] if ":" in base.rsplit("/", 1)[-1] else base
    container["image"] = name if rng.random() < 0.5 else f"{name}:latest"


def _no_limits(spec, rng):
    for container in spec["containers"]:
        (container.get("resources") or {}).pop("limits", None)
        if container.get("resources") == {}:
            container.pop("resources")


def _rbac_wildcard(docs: list[Any], rng: random.Random) -> list[Any] | None:
    docs = copy.deepcopy(docs)
    roles = [d for d in docs if isinstance(d, dict) and d.get("kind") in ("Role", "ClusterRole") and d.get("rules")]
    if not roles:
        return None
    rule = rng.choice(rng.choice(roles)["rules"])
    rule[rng.choice(["verbs", "resources"])] = ["*"]
    return docs


# -- Terraform operators (on text) --------------------------------------------------------------

_RESOURCE = re.compile(r'^resource\s+"([^"]+)"\s+"([^"]+)"\s*\{', re.MULTILINE)


def _blocks(text: str, rtype: str) -> list[tuple[int, int]]:
    """(start, end) offsets of each `resource "<rtype>"` block (end after its closing brace)."""
    out = []
    for match in _RESOURCE.finditer(text):
        if match.group(1) != rtype:
            continue
        depth, i = 0, match.end() - 1
        while i < len(text):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
            if depth == 0:
                break
        out.append((match.start(), i))
    return out


def _sub_in_block(text: str, rtype: str, pattern: str, replacement: str, rng: random.Random) -> str | None:
    candidates = [(s, e) for s, e in _blocks(text, rtype) if re.search(pattern, text[s:e], re.MULTILINE)]
    if not candidates:
        return None
    start, end = rng.choice(candidates)
    block = re.sub(pattern, replacement, text[start:end], count=1, flags=re.MULTILINE)
    return text[:start] + block + text[end:]


def _ebs_unencrypted(text, rng):
    return _sub_in_block(text, "aws_ebs_volume", r"^(\s*encrypted\s*=\s*)true", r"\g<1>false", rng)


def _rds_unencrypted(text, rng):
    for rtype in rng.sample(["aws_db_instance", "aws_rds_cluster"], 2):
        out = _sub_in_block(text, rtype, r"^(\s*storage_encrypted\s*=\s*)true", r"\g<1>false", rng)
        if out is not None:
            return out
    return None


def _s3_public_acl(text, rng):
    acl = rng.choice(["public-read", "public-read-write", "authenticated-read"])
    out = _sub_in_block(text, "aws_s3_bucket_acl", r'^(\s*acl\s*=\s*)"private"', rf'\g<1>"{acl}"', rng)
    if out is not None:
        return out
    return _sub_in_block(text, "aws_s3_bucket", r'^(\s*bucket\s*=\s*"[^"]*")$', rf'\g<1>\n  acl    = "{acl}"', rng)


def _s3_block_off(text, rng):
    key = rng.choice(["block_public_acls", "block_public_policy", "ignore_public_acls", "restrict_public_buckets"])
    return _sub_in_block(text, "aws_s3_bucket_public_access_block", rf"^(\s*{key}\s*=\s*)true", r"\g<1>false", rng)


def _s3_unencrypted(text, rng):
    blocks = _blocks(text, "aws_s3_bucket_server_side_encryption_configuration")
    if not blocks or not _blocks(text, "aws_s3_bucket"):
        return None
    for start, end in reversed(blocks):
        text = text[:start] + text[end:].lstrip("\n")
    return text


def _open_ingress(port: int) -> Callable[[str, random.Random], str | None]:
    def apply(text: str, rng: random.Random) -> str | None:
        pattern = rf"(ingress\s*\{{[^}}]*from_port\s*=\s*{port}\b[^}}]*cidr_blocks\s*=\s*)\[[^\]]*\]"
        if not re.search(pattern, text):
            return None
        return re.sub(pattern, r'\g<1>["0.0.0.0/0"]', text, count=1)

    return apply


def _iam_wildcard(text, rng):
    pattern = r"^(\s*Action\s*=\s*)(\[[^\]]*\]|\"[^\"]*\")"
    if not re.search(pattern, text, re.MULTILINE) or not _blocks(text, "aws_iam_policy"):
        return None
    return re.sub(pattern, r'\g<1>"*"', text, count=1, flags=re.MULTILINE)


MUTATIONS: dict[str, Mutation] = {
    m.name: m
    for m in (
        Mutation(
            "privileged",
            "kubernetes",
            "opa/k8s-privileged-container",
            "semgrep/k8s-privileged-container",
            _on_pod(_privileged),
        ),
        Mutation(
            "host_network", "kubernetes", "opa/k8s-host-network", "semgrep/k8s-host-network", _on_pod(_host_network)
        ),
        Mutation("host_pid", "kubernetes", "opa/k8s-host-pid", "semgrep/k8s-host-pid", _on_pod(_host_pid)),
        Mutation("run_as_root", "kubernetes", "opa/k8s-run-as-root", "semgrep/k8s-run-as-uid-0", _on_pod(_run_as_root)),
        Mutation(
            "privilege_escalation",
            "kubernetes",
            "opa/k8s-allow-privilege-escalation",
            "semgrep/k8s-allow-privilege-escalation",
            _on_pod(_privilege_escalation),
        ),
        Mutation(
            "host_path", "kubernetes", "opa/k8s-host-path-volume", "semgrep/k8s-host-path-volume", _on_pod(_host_path)
        ),
        Mutation("unpinned_image", "kubernetes", "opa/k8s-image-not-pinned", None, _on_pod(_latest_image)),
        Mutation("no_limits", "kubernetes", "opa/k8s-no-resource-limits", None, _on_pod(_no_limits)),
        Mutation("rbac_wildcard", "kubernetes", "opa/k8s-rbac-wildcard", "semgrep/k8s-rbac-wildcard", _rbac_wildcard),
        Mutation(
            "ebs_unencrypted", "terraform", "opa/tf-ebs-unencrypted", "semgrep/tf-ebs-unencrypted", _ebs_unencrypted
        ),
        Mutation("rds_unencrypted", "terraform", "opa/tf-rds-unencrypted", None, _rds_unencrypted),
        Mutation("s3_public_acl", "terraform", "opa/tf-s3-public-acl", "semgrep/tf-s3-public-acl", _s3_public_acl),
        Mutation(
            "s3_public_access_block_off",
            "terraform",
            "opa/tf-s3-public-access-block-disabled",
            "semgrep/tf-s3-public-access-block-disabled",
            _s3_block_off,
        ),
        Mutation("s3_unencrypted", "terraform", "opa/tf-s3-unencrypted", None, _s3_unencrypted),
        Mutation("open_ssh_ingress", "terraform", "opa/tf-sg-open-ssh", "semgrep/tf-sg-open-ssh", _open_ingress(22)),
        Mutation("open_rdp_ingress", "terraform", "opa/tf-sg-open-rdp", "semgrep/tf-sg-open-rdp", _open_ingress(3389)),
        Mutation(
            "iam_wildcard_action",
            "terraform",
            "opa/tf-iam-wildcard-action",
            "semgrep/tf-iam-wildcard-action",
            _iam_wildcard,
        ),
    )
}


# -- seeds, renaming, rendering -----------------------------------------------------------------


def _strip_comments(text: str) -> str:
    """Full-line comments dropped: a seed's comment ("SAMPLE (clean): ...") must not leak a label."""
    return "".join(line for line in text.splitlines(keepends=True) if not line.lstrip().startswith("#"))


def default_seeds(include_bundled: bool = False) -> list[Seed]:
    """The templates above, and with `include_bundled` the bundled clean files too (they are
    E2's `test` split: variants of them in training data would leak into the evaluation)."""
    seeds = [Seed(f"template-{name.split('.')[0]}", name, text, f"template:{name}") for name, text in TEMPLATES.items()]
    if include_bundled:
        seeds += [Seed(e.id, e.filename, e.content, f"bundled:{e.id}") for e in bundled_examples() if e.clean]
    return seeds


def dataset_seeds(paths: Iterable[str], errors: list[str]) -> list[Seed]:
    """Clean rows of E2 dataset files; a file that cannot be read is appended to `errors`
    (its message names the file and line) and skipped."""
    seeds = []
    for path in paths:
        try:
            examples = read_examples(path)
        except Exception as exc:  # DatasetError / OSError: the message names file and line
            errors.append(str(exc))
            continue
        for number, example in enumerate(examples, start=1):
            if example.clean:
                seeds.append(Seed(example.id, example.filename, example.content, f"{path}#{number}"))
    return seeds


def _rename_k8s(docs: list[Any], suffix: str) -> list[Any]:
    docs = copy.deepcopy(docs)
    names = {
        d["metadata"]["name"]
        for d in docs
        if isinstance(d, dict) and isinstance(d.get("metadata"), dict) and isinstance(d["metadata"].get("name"), str)
    }

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return f"{value}-{suffix}" if isinstance(value, str) and value in names else value

    return walk(docs)


def _rename_tf(text: str, suffix: str) -> str:
    for rtype, name in set(_RESOURCE.findall(text)):
        new = f"{name}_{suffix}"
        text = re.sub(rf'(resource\s+"{re.escape(rtype)}"\s+)"{re.escape(name)}"', rf'\1"{new}"', text)
        text = re.sub(rf"\b{re.escape(rtype)}\.{re.escape(name)}\b", f"{rtype}.{new}", text)
    return re.sub(
        r'^(\s*(?:bucket|name|cluster_identifier|identifier)\s*=\s*")([a-z0-9-]+)(")',
        rf"\g<1>\g<2>-{suffix}\g<3>",
        text,
        flags=re.MULTILINE,
    )


def _dump(docs: list[Any]) -> str:
    return yaml.safe_dump_all(docs, sort_keys=False, default_flow_style=False, width=120)


def _load(text: str) -> list[Any]:
    """The non-empty documents of a YAML file. Seeds may come from a user's dataset and
    variations from a model's reply, so this is the bounded loader (size, depth and alias
    limits checked before PyYAML builds anything); InputError when a bound is passed."""
    return [document.value for document in load_yaml_documents(text)]


def unified_diff(vulnerable: str, fixed: str, filename: str) -> str:
    return "".join(
        difflib.unified_diff(
            vulnerable.splitlines(keepends=True), fixed.splitlines(keepends=True), f"a/{filename}", f"b/{filename}"
        )
    )


@dataclass
class Candidate:
    row: dict[str, Any]
    fixed: str | None
    """The fixed file (None for a clean row)."""
    mutation: Mutation | None


def make_pair(seed: Seed, mutation: Mutation | None, suffix: str, rng: random.Random) -> tuple[str, str | None] | None:
    """(vulnerable or clean content, fixed content or None) for one seed; None when the
    mutation does not apply to it."""
    kind = file_kind(seed.filename)
    if mutation is not None and mutation.kind != kind:
        return None
    if kind == "kubernetes":
        base = _rename_k8s(_load(seed.content), suffix)
        if mutation is None:
            return _dump(base), None
        mutated = mutation.apply(base, rng)
        return (_dump(mutated), _dump(base)) if mutated is not None and mutated != base else None
    base_text = _rename_tf(_strip_comments(seed.content), suffix)
    if mutation is None:
        return base_text, None
    mutated_text = mutation.apply(base_text, rng)
    return (mutated_text, base_text) if mutated_text is not None and mutated_text != base_text else None


def generate(
    n: int,
    rng: random.Random,
    seeds: Sequence[Seed],
    *,
    id_prefix: str,
    clean_share: float = 0.25,
    info: dict[str, Any] | None = None,
) -> tuple[list[Candidate], list[dict[str, Any]]]:
    """`n` candidates: about `clean_share` renamed clean seeds, the rest (seed, mutation)
    pairs drawn uniformly from those that apply; and the draws that did not produce a file
    (as reject records). Labels come later, from `label_pairs`."""
    candidates: list[Candidate] = []
    rejects: list[dict[str, Any]] = []
    base_info = {"generator": f"{GENERATOR_ID}@{GENERATOR_VERSION}", **(info or {})}
    pairs = [(s, m) for s in seeds for m in MUTATIONS.values() if m.kind == file_kind(s.filename)]
    attempts = 0
    while len(candidates) < n and attempts < 20 * n + 20:
        i = len(candidates)
        clean = rng.random() < clean_share or not pairs
        made = None
        # Redraw within the chosen kind until an operator applies, so the clean share holds.
        while made is None and attempts < 20 * n + 20:
            attempts += 1
            seed, mutation = (rng.choice(list(seeds)), None) if clean else rng.choice(pairs)
            suffix = f"{rng.randrange(16**4):04x}"
            try:
                made = make_pair(seed, mutation, suffix, rng)
            # A seed the loader refuses (InputError) or the operator cannot walk.
            except (InputError, yaml.YAMLError, KeyError, TypeError, AttributeError) as exc:
                rejects.append(
                    {
                        "id": f"{id_prefix}-draw{attempts}",
                        "stage": "template",
                        "source": seed.source,
                        "reason": f"{mutation.name if mutation else 'clean'} on {seed.id}: {type(exc).__name__}: {exc}",
                    }
                )
        if made is None:
            break
        content, fixed = made
        stem, _, ext = seed.filename.rpartition(".")
        filename = f"{re.sub(r'[^A-Za-z0-9_-]+', '-', stem)}-{suffix}.{ext}"
        row = {
            "id": f"{id_prefix}-{i:05d}",
            "filename": filename,
            "content": content,
            "expected": {},
            "clean": mutation is None,
            "sample": True,
            "description": (
                f"synthetic: {mutation.name} applied to {seed.id}"
                if mutation
                else f"synthetic: {seed.id} renamed (clean)"
            ),
            "info": {
                **base_info,
                "scenario": mutation.name if mutation else "clean",
                "family": file_kind(filename),
                "seed": seed.source,
            },
        }
        if fixed is not None:
            row["fix"] = {"content": fixed, "diff": unified_diff(content, fixed, filename)}
        candidates.append(Candidate(row, fixed, mutation))
    return candidates, rejects


def label_pairs(candidates: Sequence[Candidate], suite: Any) -> list[str | None]:
    """Run the tools on every vulnerable and fixed file of the batch at once (one process
    per CLI tool) and settle each candidate's label; per candidate None (it stands: its row
    gets `expected`, `info.tools_flagging`, `info.difficulty`) or why it was rejected."""
    files: dict[str, str] = {}
    for i, c in enumerate(candidates):
        files[f"{i}/v/{c.row['filename']}"] = c.row["content"]
        if c.fixed is not None:
            files[f"{i}/f/{c.row['filename']}"] = c.fixed
    results = suite.scan_many(files) if files else {}
    verdicts: list[str | None] = []
    for i, c in enumerate(candidates):
        vuln = results.get(f"{i}/v/{c.row['filename']}", {})
        opa = vuln.get("opa")
        if opa is None or opa.error:
            verdicts.append(f"opa could not scan the file: {opa.error if opa else 'no result'}")
            continue
        found = {tool: sorted(r.ids) for tool, r in vuln.items() if not r.error}
        errors = {tool: r.error for tool, r in vuln.items() if r.error}
        if c.mutation is None:
            flagged = sorted(i for ids in found.values() for i in ids)
            if flagged:
                verdicts.append(f"clean seed flagged by the tools: {flagged}")
                continue
            c.row["info"].update(tools_flagging=[], difficulty=0, difficulty_basis="clean file", tool_errors=errors)
            verdicts.append(None)
            continue
        fixed = results.get(f"{i}/f/{c.row['filename']}", {})
        fixed_found = sorted(i for tool, r in fixed.items() if not r.error for i in r.ids)
        if c.mutation.target not in found.get("opa", []):
            verdicts.append(
                f"{c.mutation.name}: vulnerable file does not trigger {c.mutation.target} (opa found {found.get('opa')})"
            )
            continue
        if fixed_found:
            verdicts.append(f"{c.mutation.name}: fixed file is not clean ({fixed_found})")
            continue
        flagging = sorted(tool for tool, ids in found.items() if ids)
        c.row["expected"] = found
        # Curriculum (0..2): a weakness every available tool reports is 1; one only some tools see is 2.
        every = len(flagging) == len(found)
        c.row["info"].update(
            target={"opa": c.mutation.target, "semgrep": c.mutation.semgrep},
            tools_flagging=flagging,
            difficulty=1 if every else 2,
            difficulty_basis="every tool flags it" if every else "only some tools flag it",
            tool_errors=errors,
        )
        verdicts.append(None)
    return verdicts


# -- model variations --------------------------------------------------------------------------


def variation_prompt(row: dict[str, Any]) -> str:
    """A seed model rewrites the (vulnerable) file with other names and values; the tools
    then decide whether the weakness survived."""
    kind = file_kind(row["filename"])
    lang = "Kubernetes YAML" if kind == "kubernetes" else "Terraform (HCL)"
    return (
        f"Rewrite this {lang} file for a different application: change names, labels, images or tags and "
        "numeric values, keep its structure and every security setting exactly as it is. Reply with the file "
        f"only, in one fenced code block.\n\n```\n{row['content']}```"
    )


def parse_variation(row: dict[str, Any], text: str, suffix: str) -> dict[str, Any]:
    """A new candidate row from a model's rewrite (the same scenario, to be re-labelled by
    the tools); ValueError when the reply holds no parsable file."""
    match = re.search(r"```[A-Za-z0-9_-]*\n(.*?)```", text or "", re.DOTALL)
    body = match.group(1) if match else (text or "")
    if not body.strip():
        raise ValueError("empty reply")
    kind = file_kind(row["filename"])
    try:
        if kind == "kubernetes":
            if not _load(body):
                raise ValueError("no YAML document in the reply")
        else:
            load_terraform(body)  # the package's one (thread-safe) way to parse HCL
    except InputError as exc:
        raise ValueError(f"reply is not valid {kind}: {exc}") from exc
    except ValueError:
        raise
    except Exception as exc:  # both loaders wrap their parsers' errors; anything else, in one line
        raise ValueError(f"reply is not valid {kind}: {' '.join(str(exc).split())[:200]}") from exc
    stem, _, ext = row["filename"].rpartition(".")
    out = json.loads(json.dumps(row))
    out["filename"] = f"{stem}-{suffix}.{ext}"
    out["content"] = body
    out.pop("fix", None)
    return out


__all__ = [
    "GENERATOR_ID",
    "GENERATOR_VERSION",
    "MUTATIONS",
    "TEMPLATES",
    "Candidate",
    "Mutation",
    "Seed",
    "dataset_seeds",
    "default_seeds",
    "generate",
    "label_pairs",
    "make_pair",
    "parse_variation",
    "unified_diff",
    "variation_prompt",
]
