"""E2's corpora: Kubernetes manifests and Terraform files (GenKubeSec's labelled pairs, policy
test suites, deliberately vulnerable repositories), one task row per file; and Terraform test
fixtures whose files hold many resources (Terrascan's), one task row per resource."""

import re
from pathlib import PurePosixPath
from typing import Any

import numpy as np

from sv_shared.corpora import (
    CorpusSpec,
    Item,
    Normalised,
    Normalizer,
    RowSchema,
    SourceSpec,
    column,
    label_of,
    records,
    refs,
    reject,
    set_top_sample,
    short_hash,
    text_of,
)

MAX_CONFIG_BYTES = 2_000_000
"""Corpus files above this size are rejects."""


def _config_problem(content: str) -> str | None:
    if not content.strip():
        return "empty file"
    if len(content.encode("utf-8", errors="surrogatepass")) > MAX_CONFIG_BYTES:
        return f"larger than {MAX_CONFIG_BYTES} bytes (E2 refuses it)"
    if "\x00" in content:
        return "binary content"
    return None


def _safe_name(name: str, suffix: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip(".-") or "config"
    return stem if stem.lower().endswith(suffix) else f"{stem}{suffix}"


def _row(
    spec: SourceSpec, filename: str, content: str, clean: bool | None, expected: dict[str, list[str]], description: str
) -> dict[str, Any]:
    return {
        "id": f"{spec.id}-{short_hash(content)}",
        "filename": filename,
        "content": content,
        "expected": expected,
        "clean": clean,
        "sample": False,
        "description": description,
    }


def config_pairs(spec: SourceSpec, frame: Any) -> Normalised:
    """GenKubeSec-style pairs: the misconfigured manifest (clean: false, its labels as
    `expected`) and the remediated one (clean unknown: only the labelled issues were fixed)."""
    result = Normalised()
    where = refs(frame)
    ids, before = column(frame, spec, "id"), column(frame, spec, "before")
    after, labels = column(frame, spec, "after"), column(frame, spec, "labels")
    for i in range(len(frame)):
        config_id = text_of(ids.iloc[i]) if ids is not None else f"{spec.id}-{i + 1}"
        original = text_of(before.iloc[i]) if before is not None else ""
        problem = _config_problem(original)
        if problem:
            result.rejects.append(reject(spec.id, where[i], f"misconfigured manifest: {problem}"))
            continue
        found = (
            [str(x) for x in labels.iloc[i]]
            if labels is not None and isinstance(labels.iloc[i], (list, tuple, np.ndarray))
            else []
        )
        result.items.append(
            Item(
                "e2",
                _row(
                    spec,
                    _safe_name(config_id, ".yaml"),
                    original,
                    False,
                    {spec.id: found},
                    f"{spec.title}: {config_id} (misconfigured)",
                ),
                spec.id,
                where[i],
            )
        )
        fixed = text_of(after.iloc[i]) if after is not None else ""
        if fixed.strip() and not _config_problem(fixed) and fixed != original:
            result.items.append(
                Item(
                    "e2",
                    _row(
                        spec,
                        _safe_name(f"{config_id}-fixed", ".yaml"),
                        fixed,
                        None,
                        {},
                        f"{spec.title}: {config_id} (remediated)",
                    ),
                    spec.id,
                    where[i],
                )
            )
    return result


def _path_label(path: str, rules: list[dict[str, str]]) -> str | None:
    name = PurePosixPath(path).name
    for rule in rules:
        if re.search(rule["pattern"], name):
            return rule["label"]
    return None


def config_files(spec: SourceSpec, frame: Any) -> Normalised:
    """Kubernetes manifests and Terraform files, one task per file; whether a file should
    pass comes from its name where the corpus says so (`path_labels`), else unknown."""
    result = Normalised()
    rules = spec.options.get("path_labels") or []
    where = refs(frame)
    for i, row in enumerate(records(frame[["path", "text"]])):
        path, text = text_of(row["path"]), text_of(row["text"])
        lower = path.lower()
        if not lower.endswith((".yaml", ".yml", ".tf", ".hcl")):
            result.n_filtered += 1
            continue
        if lower.endswith((".yaml", ".yml")) and not (
            re.search(r"(?m)^\s*apiVersion:", text) and re.search(r"(?m)^\s*kind:", text)
        ):
            result.n_filtered += 1  # CI workflows, Helm values, ...: not Kubernetes manifests
            continue
        problem = _config_problem(text)
        if problem:
            result.rejects.append(reject(spec.id, f"{where[i]} ({path})", problem))
            continue
        label = _path_label(path, rules)
        clean = True if label == "clean" else False if label == "misconfigured" else None
        suffix = PurePosixPath(path).suffix.lower()
        result.items.append(
            Item(
                "e2",
                _row(spec, _safe_name(PurePosixPath(path).name, suffix), text, clean, {}, f"{spec.title}: {path}"),
                spec.id,
                f"{where[i]} ({path})",
            )
        )
    return result


_VARIABLE_REF = re.compile(r"\bvar\.([A-Za-z_][A-Za-z0-9_-]*)")


def terraform_resources(spec: SourceSpec, frame: Any) -> Normalised:
    """One task per `resource` block of each Terraform file, with the file's `variable` blocks
    it references before it; the source's label (`label`: e.g. Terrascan's fail/success
    folder, the `_split` column) becomes `clean`. The file name shown to the model is the
    resource's address, never the folder: the label would be in it. The tools' verdict is
    the environment's own, taken when a row is scored."""
    from sv_env_config_verification.inputs import InputError, terraform_blocks

    result = Normalised()
    where = refs(frame)
    for i, row in enumerate(records(frame[["path", "text", "_split"]])):
        path, text = text_of(row["path"]), text_of(row["text"])
        if not path.lower().endswith(".tf"):
            result.n_filtered += 1
            continue
        label = label_of(row["_split"], spec.label)[0] if spec.label is not None else None
        clean = True if label == "clean" else False if label == "misconfigured" else None
        problem = _config_problem(text)
        try:
            blocks = [] if problem else terraform_blocks(text)
        except InputError as exc:
            problem = str(exc)
        if problem:
            result.rejects.append(reject(spec.id, f"{where[i]} ({path})", problem))
            continue
        variables = {b["labels"][0]: b["text"] for b in blocks if b["kind"] == "variable" and b["labels"]}
        for block in blocks:
            if block["kind"] != "resource" or len(block["labels"]) != 2:
                continue
            address = ".".join(block["labels"])
            used = dict.fromkeys(_VARIABLE_REF.findall(block["text"]))
            content = "".join(f"{variables[name]}\n\n" for name in used if name in variables) + block["text"] + "\n"
            record = _row(
                spec, _safe_name(address, ".tf"), content, clean, {}, f"{spec.title}: {path}, resource {address}"
            )
            if spec.test_only:
                record["test_source"] = spec.id
            result.items.append(Item("e2", record, spec.id, f"{where[i]} ({path}: resource {address})"))
    return result


def _label(row: dict[str, Any]) -> str:
    clean = row.get("clean")
    return "clean" if clean is True else "misconfigured" if clean is False else "unknown"


def _scenario(row: dict[str, Any]) -> str:
    name = str(row.get("filename") or "").lower()
    return "terraform" if name.endswith((".tf", ".hcl")) else "kubernetes"


CORPORA = CorpusSpec(
    normalizers={
        "e2_config_pairs": Normalizer(config_pairs),
        "e2_config_files": Normalizer(config_files, ("path_labels",)),
        "e2_terraform_resources": Normalizer(terraform_resources),
    },
    schema=RowSchema(
        "e2",
        ("id", "filename", "content"),
        _label,
        lambda r: str(r.get("content") or ""),
        _scenario,
        set_top_sample,
        lambda r: r.get("sample"),
        allowed_labels=("clean", "misconfigured", "unknown"),
    ),
    test_sources=("bundled", "corpora"),
)
