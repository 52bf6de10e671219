"""From a corpus table (in the corpus's own columns) to rows in an environment's schema.

One normaliser per corpus layout, named in the registry. Each returns the rows it could use,
the rows it could not (`rejects`: source, file:line, reason; recorded, never silently
dropped) and a count of rows left out by design (`filtered`: Enron's spam, Juliet's support
files, commits that are not security fixes). E1 stays a DataFrame (a corpus can hold
millions of flows); the others are row dicts.
"""

from __future__ import annotations

import email
import email.policy
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

import numpy as np
import pandas as pd

from sv_dagster.core.corpora.registry import LabelSpec, SourceSpec
from sv_dagster.core.corpora.schemas import content_hash

MAX_CONFIG_BYTES = 2_000_000
"""E2 refuses larger files (sv_env_config_verification.inputs.MAX_BYTES)."""
_URL = re.compile(r"https?://[^\s<>\"')\]]+", re.IGNORECASE)
_TAG = re.compile(r"<[^>]+>")


@dataclass
class Item:
    """One row for an environment's dataset, with where it came from."""

    schema: str
    """e1..e6, or e3_fix_pairs / e3_functions."""
    record: dict[str, Any]
    source: str
    ref: str
    ood: bool = False


@dataclass
class Normalised:
    items: list[Item] = field(default_factory=list)
    flows: pd.DataFrame | None = None
    """E1 only: Zeek fields + label, scenario, _ref."""
    rejects: list[dict[str, Any]] = field(default_factory=list)
    n_filtered: int = 0


@dataclass(frozen=True)
class Normalizer:
    fn: Callable[[SourceSpec, pd.DataFrame, str], Normalised]
    envs: tuple[str, ...]
    options: tuple[str, ...] = ()
    """Registry fields this normaliser reads beyond the common ones."""


def _raw_text(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    if isinstance(value, (bool, np.bool_)):
        return str(int(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return str(int(value)) if float(value).is_integer() else str(float(value))
    return str(value)


def label_of(value: Any, spec: LabelSpec) -> tuple[str | None, bool]:
    """(the environment's label or None, dropped by design)."""
    if spec.value is not None:
        return spec.value, False
    raw = _raw_text(value)
    if raw is None or not raw.strip():
        return None, False
    if raw in spec.drop or raw.strip() in spec.drop:
        return None, True
    key = raw.strip()
    if spec.match == "casefold":
        key = key.casefold()
    elif spec.match == "first_word":
        key = key.split()[0].casefold()
    return spec.map.get(key, spec.default), False


def labels_of(values: pd.Series, spec: LabelSpec) -> tuple[pd.Series, np.ndarray]:
    """Vectorised `label_of` over the distinct values (a million rows hold few labels)."""
    if spec.value is not None:
        return pd.Series([spec.value] * len(values), index=values.index, dtype=object), np.zeros(len(values), bool)
    codes, uniques = pd.factorize(values, use_na_sentinel=True)
    mapped = [label_of(u, spec) for u in uniques]
    labels = np.array([m[0] for m in mapped] + [None], dtype=object)[codes]
    dropped = np.array([m[1] for m in mapped] + [False], dtype=bool)[codes]
    return pd.Series(labels, index=values.index, dtype=object), dropped


def _refs(frame: pd.DataFrame) -> np.ndarray:
    return (frame["_file"].astype(str) + ":" + frame["_line"].astype(str)).to_numpy()


def _reject(source: str, ref: str, reason: str) -> dict[str, Any]:
    return {"source": source, "ref": ref, "reason": reason}


def _text(value: Any) -> str:
    return "" if value is None or (isinstance(value, float) and np.isnan(value)) else str(value)


def _column(frame: pd.DataFrame, spec: SourceSpec, field_name: str) -> pd.Series | None:
    name = spec.columns.get(field_name)
    return frame[name] if name and name in frame.columns else None


def _rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return frame.to_dict(orient="records")


def _h(text: str, n: int = 12) -> str:
    return content_hash(text)[:n]


# --- E1 ------------------------------------------------------------------------------------


def e1_flows(spec: SourceSpec, frame: pd.DataFrame, env: str) -> Normalised:
    """Flows in the Zeek conn.log fields E1 renders (`columns`: Zeek field -> corpus column;
    fields a corpus does not have render as "-")."""
    from sv_env_network_logs.flows import FLOW_FIELD_NAMES

    out = pd.DataFrame(index=frame.index)
    for name in FLOW_FIELD_NAMES:
        column = _column(frame, spec, name)
        if column is None:
            out[name] = None
            continue
        source_name = spec.columns[name]
        if source_name in spec.null_values:
            column = column.mask(column.astype(str).isin(spec.null_values[source_name]))
        if name in spec.scale:
            column = pd.to_numeric(column, errors="coerce") * spec.scale[name]
        out[name] = column
    assert spec.label is not None
    label_column = frame[spec.label.column] if spec.label.column else pd.Series(index=frame.index, dtype=object)
    labels, dropped = labels_of(label_column, spec.label)
    out["label"] = labels
    scenario = frame[spec.scenario_column] if spec.scenario_column and spec.scenario_column in frame.columns else None
    out["scenario"] = scenario.astype(object).where(scenario.notna(), None) if scenario is not None else None
    out["_ref"] = _refs(frame)
    unusable = (labels.isna().to_numpy() & ~dropped)
    no_fields = out[list(FLOW_FIELD_NAMES)].isna().all(axis=1).to_numpy()
    bad = unusable | no_fields
    rejects = [
        _reject(spec.id, ref, f"unusable label {label_column.iloc[i]!r}" if unusable[i] else "no flow fields")
        for i, ref in zip(np.flatnonzero(bad), out["_ref"].to_numpy()[bad])
    ]
    keep = ~bad & ~dropped
    return Normalised(flows=out.loc[keep].reset_index(drop=True), rejects=rejects, n_filtered=int(dropped.sum()))


# --- E2 ------------------------------------------------------------------------------------


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


def _e2_row(spec: SourceSpec, filename: str, content: str, clean: bool | None, expected: dict[str, list[str]],
            description: str) -> dict[str, Any]:
    return {"id": f"{spec.id}-{_h(content)}", "filename": filename, "content": content, "expected": expected,
            "clean": clean, "sample": False, "description": description}


def e2_config_pairs(spec: SourceSpec, frame: pd.DataFrame, env: str) -> Normalised:
    """GenKubeSec-style pairs: the misconfigured manifest (clean: false, its labels as
    `expected`) and the remediated one (clean unknown: only the labelled issues were fixed)."""
    result = Normalised()
    refs = _refs(frame)
    ids, before = _column(frame, spec, "id"), _column(frame, spec, "before")
    after, labels = _column(frame, spec, "after"), _column(frame, spec, "labels")
    for i in range(len(frame)):
        config_id = _text(ids.iloc[i]) if ids is not None else f"{spec.id}-{i + 1}"
        original = _text(before.iloc[i]) if before is not None else ""
        problem = _config_problem(original)
        if problem:
            result.rejects.append(_reject(spec.id, refs[i], f"misconfigured manifest: {problem}"))
            continue
        found = [str(x) for x in labels.iloc[i]] if labels is not None and isinstance(labels.iloc[i], (list, tuple, np.ndarray)) else []
        result.items.append(Item("e2", _e2_row(spec, _safe_name(config_id, ".yaml"), original, False, {spec.id: found},
                                               f"{spec.title}: {config_id} (misconfigured)"), spec.id, refs[i]))
        fixed = _text(after.iloc[i]) if after is not None else ""
        if fixed.strip() and not _config_problem(fixed) and fixed != original:
            result.items.append(Item("e2", _e2_row(spec, _safe_name(f"{config_id}-fixed", ".yaml"), fixed, None, {},
                                                   f"{spec.title}: {config_id} (remediated)"), spec.id, refs[i]))
    return result


def _path_label(path: str, rules: list[dict[str, str]]) -> str | None:
    name = PurePosixPath(path).name
    for rule in rules:
        if re.search(rule["pattern"], name):
            return rule["label"]
    return None


def e2_config_files(spec: SourceSpec, frame: pd.DataFrame, env: str) -> Normalised:
    """Kubernetes manifests and Terraform files, one task per file; whether a file should
    pass comes from its name where the corpus says so (`path_labels`), else unknown."""
    result = Normalised()
    rules = spec.options.get("path_labels") or []
    refs = _refs(frame)
    for i, row in enumerate(_rows(frame[["path", "text"]])):
        path, text = _text(row["path"]), _text(row["text"])
        lower = path.lower()
        if not lower.endswith((".yaml", ".yml", ".tf", ".hcl")):
            result.n_filtered += 1
            continue
        if lower.endswith((".yaml", ".yml")) and not (re.search(r"(?m)^\s*apiVersion:", text) and re.search(r"(?m)^\s*kind:", text)):
            result.n_filtered += 1  # CI workflows, Helm values, ...: not Kubernetes manifests
            continue
        problem = _config_problem(text)
        if problem:
            result.rejects.append(_reject(spec.id, f"{refs[i]} ({path})", problem))
            continue
        label = _path_label(path, rules)
        clean = True if label == "clean" else False if label == "misconfigured" else None
        suffix = PurePosixPath(path).suffix.lower()
        result.items.append(Item("e2", _e2_row(spec, _safe_name(PurePosixPath(path).name, suffix), text, clean, {},
                                               f"{spec.title}: {path}"), spec.id, f"{refs[i]} ({path})"))
    return result


# --- E3 ------------------------------------------------------------------------------------


def _vulnerable(value: Any) -> bool | None:
    raw = _raw_text(value)
    if raw is None:
        return None
    return {"1": True, "0": False, "true": True, "false": False}.get(raw.strip().lower())


def _cwe(value: Any) -> str:
    match = re.search(r"CWE-?(\d+)", _text(value), re.IGNORECASE)
    return f"CWE-{match.group(1)}" if match else "unknown"


def _language(value: Any, default: str = "c") -> str:
    text = _text(value).strip().lower()
    return {"c++": "cpp", "cxx": "cpp", "cc": "cpp"}.get(text, text or default)


def _function(spec: SourceSpec, code: str, vulnerable: bool, cwe: str, language: str, meta: dict[str, Any]) -> dict[str, Any]:
    return {"id": f"{spec.id}-fn-{_h(code)}", "code": code, "label": "vulnerable" if vulnerable else "clean",
            "cwe": cwe, "language": language, "source": spec.id, "sample": False, "meta": meta}


def _pair(spec: SourceSpec, before: str, after: str, cwe: str, language: str, meta: dict[str, Any]) -> dict[str, Any]:
    return {"id": f"{spec.id}-fix-{_h(before + chr(0) + after)}", "cwe": cwe, "language": language,
            "before": before, "after": after, "source": spec.id, "sample": False, "meta": meta}


def e3_functions(spec: SourceSpec, frame: pd.DataFrame, env: str) -> Normalised:
    """Functions labelled vulnerable or not (Devign, CodeXGLUE): no fix, so no pair."""
    result = Normalised()
    refs = _refs(frame)
    code, label = _column(frame, spec, "code"), _column(frame, spec, "label")
    project, commit = _column(frame, spec, "project"), _column(frame, spec, "commit")
    for i in range(len(frame)):
        text = _text(code.iloc[i]) if code is not None else ""
        vulnerable = _vulnerable(label.iloc[i]) if label is not None else None
        if not text.strip() or vulnerable is None:
            result.rejects.append(_reject(spec.id, refs[i], "empty function" if not text.strip() else
                                          f"unusable label {label.iloc[i]!r} (expected 0/1)"))
            continue
        meta = {"project": _text(project.iloc[i]) if project is not None else "",
                "commit": _text(commit.iloc[i]) if commit is not None else ""}
        result.items.append(Item("e3_functions", _function(spec, text, vulnerable, "unknown", "c", meta), spec.id, refs[i]))
    return result


def e3_bigvul(spec: SourceSpec, frame: pd.DataFrame, env: str) -> Normalised:
    """Big-Vul: every function before the fix (labelled), and for vulnerable ones whose code
    changed, the vulnerable -> fixed pair."""
    result = Normalised()
    refs = _refs(frame)
    cols = {name: _column(frame, spec, name) for name in ("before", "after", "label", "cwe", "cve", "language", "project", "commit")}

    def get(name: str, i: int) -> Any:
        return cols[name].iloc[i] if cols[name] is not None else None

    for i in range(len(frame)):
        before, after = _text(get("before", i)), _text(get("after", i))
        vulnerable = _vulnerable(get("label", i))
        if not before.strip() or vulnerable is None:
            result.rejects.append(_reject(spec.id, refs[i], "empty func_before" if not before.strip()
                                          else f"unusable label {get('label', i)!r} (expected 0/1)"))
            continue
        cwe, language = _cwe(get("cwe", i)), _language(get("language", i))
        meta = {"cve": _text(get("cve", i)), "project": _text(get("project", i)), "commit": _text(get("commit", i))}
        result.items.append(Item("e3_functions", _function(spec, before, vulnerable, cwe, language, meta), spec.id, refs[i]))
        if vulnerable and after.strip() and after != before:
            result.items.append(Item("e3_fix_pairs", _pair(spec, before, after, cwe, language, meta), spec.id, refs[i]))
    return result


_OMITBAD = re.compile(r"#ifndef\s+OMITBAD\s*\n(.*?)#endif\s*/\*\s*OMITBAD\s*\*/", re.DOTALL)
_OMITGOOD = re.compile(r"#ifndef\s+OMITGOOD\s*\n(.*?)#endif\s*/\*\s*OMITGOOD\s*\*/", re.DOTALL)


def e3_juliet(spec: SourceSpec, frame: pd.DataFrame, env: str) -> Normalised:
    """Juliet test cases: the OMITBAD block (flawed) and the OMITGOOD block (the same sink made
    safe) of each file are a vulnerable -> fixed pair; support files have neither."""
    result = Normalised()
    refs = _refs(frame)
    for i, row in enumerate(_rows(frame[["path", "text"]])):
        path, text = _text(row["path"]), _text(row["text"])
        bad, good = _OMITBAD.search(text), _OMITGOOD.search(text)
        if not bad or not good:
            result.n_filtered += 1
            continue
        before, after = bad.group(1).strip() + "\n", good.group(1).strip() + "\n"
        cwe = _cwe(PurePosixPath(path).name)
        language = "cpp" if path.lower().endswith(".cpp") else "c"
        meta = {"path": path}
        ref = f"{refs[i]} ({path})"
        result.items.append(Item("e3_fix_pairs", _pair(spec, before, after, cwe, language, meta), spec.id, ref))
        result.items.append(Item("e3_functions", _function(spec, before, True, cwe, language, meta), spec.id, ref))
        result.items.append(Item("e3_functions", _function(spec, after, False, cwe, language, meta), spec.id, ref))
    return result


def e3_commits(spec: SourceSpec, frame: pd.DataFrame, env: str) -> Normalised:
    """Commit before/after contents whose message says they fix a security issue."""
    result = Normalised()
    refs = _refs(frame)
    pattern = re.compile(spec.options.get("message_filter") or ".")
    cols = {name: _column(frame, spec, name) for name in ("before", "after", "message", "path", "language", "commit", "origin")}

    def get(name: str, i: int) -> str:
        return _text(cols[name].iloc[i]) if cols[name] is not None else ""

    for i in range(len(frame)):
        before, after, message = get("before", i), get("after", i), get("message", i)
        if not pattern.search(message):
            result.n_filtered += 1
            continue
        if not before.strip() or not after.strip() or before == after:
            result.rejects.append(_reject(spec.id, refs[i], "security commit without a before/after change"))
            continue
        meta = {"commit": get("commit", i), "path": get("path", i), "repo": get("origin", i), "message": message[:500]}
        item = _pair(spec, before, after, _cwe(message), _language(get("language", i), "unknown"), meta)
        result.items.append(Item("e3_fix_pairs", item, spec.id, refs[i]))
    return result


# --- E4 ------------------------------------------------------------------------------------


def _links(*texts: str) -> list[str]:
    seen: dict[str, None] = {}
    for text in texts:
        for url in _URL.findall(text or ""):
            seen.setdefault(url.rstrip(".,;:"), None)
    return list(seen)[:50]


def _e4_item(spec: SourceSpec, raw_email: dict[str, Any], label: str, ref: str) -> Item | dict[str, Any]:
    from sv_env_phishing_detection.emails import normalize_email, render_email_question

    mail, notes = normalize_email(raw_email)
    if "empty email" in notes:
        return _reject(spec.id, ref, "empty email (no sender, subject, body, links or attachments)")
    question = render_email_question(mail)
    info = {"email": mail, "scenario": spec.id, "source": spec.id, "sample": False}
    if notes:
        info["notes"] = notes
    return Item("e4", {"id": f"{spec.id}-{_h(question)}", "question": question, "answer": label, "info": info}, spec.id, ref)


def _add(result: Normalised, made: Item | dict[str, Any]) -> None:
    (result.items.append if isinstance(made, Item) else result.rejects.append)(made)


def e4_emails(spec: SourceSpec, frame: pd.DataFrame, env: str) -> Normalised:
    """Emails from table columns (`columns`: from, reply_to, to, subject, body); links are the
    URLs in the body, so evidence can be checked against what the model saw."""
    result = Normalised()
    refs = _refs(frame)
    assert spec.label is not None
    raw_labels = frame[spec.label.column] if spec.label.column else pd.Series([None] * len(frame))
    labels, dropped = labels_of(raw_labels, spec.label)
    cols = {name: _column(frame, spec, name) for name in ("from", "reply_to", "to", "subject", "body")}
    for i in range(len(frame)):
        if dropped[i]:
            result.n_filtered += 1
            continue
        label = labels.iloc[i]
        if label is None:
            result.rejects.append(_reject(spec.id, refs[i], f"unusable label {raw_labels.iloc[i]!r}"))
            continue
        raw = {name: _text(col.iloc[i]) for name, col in cols.items() if col is not None}
        raw["links"] = _links(raw.get("body", ""))
        _add(result, _e4_item(spec, raw, label, refs[i]))
    return result


def _eml_fields(text: str) -> dict[str, Any]:
    message = email.message_from_string(text, policy=email.policy.default)
    body_part = message.get_body(preferencelist=("plain", "html")) if message.is_multipart() else message
    try:
        body = body_part.get_content() if body_part is not None else ""
    except (LookupError, KeyError, ValueError):  # unknown charset / broken transfer encoding
        payload = body_part.get_payload(decode=True) if body_part is not None else b""
        body = payload.decode("utf-8", errors="replace") if isinstance(payload, bytes) else str(payload or "")
    hrefs = re.findall(r"href=[\"']?([^\"' >]+)", body or "", re.IGNORECASE)
    if body_part is not None and body_part.get_content_type() == "text/html":
        body = re.sub(r"\n\s*\n+", "\n\n", _TAG.sub("", body))
    attachments = [part.get_filename() for part in message.iter_attachments()] if message.is_multipart() else []
    return {
        "from": str(message.get("From", "")), "reply_to": str(message.get("Reply-To", "")),
        "to": str(message.get("To", "")), "subject": str(message.get("Subject", "")), "body": body,
        "links": _links(body, " ".join(hrefs)), "attachments": [a for a in attachments if a],
    }


def e4_eml(spec: SourceSpec, frame: pd.DataFrame, env: str) -> Normalised:
    """RFC 822 messages (.eml files, one per row): headers, the plain (or de-tagged HTML) body,
    links and attachment names."""
    result = Normalised()
    assert spec.label is not None and spec.label.value is not None
    refs = _refs(frame)
    for i, row in enumerate(_rows(frame[["path", "text"]])):
        ref = f"{refs[i]} ({row['path']})"
        try:
            raw = _eml_fields(_text(row["text"]))
        except Exception as exc:  # the email package raises many types on broken messages
            result.rejects.append(_reject(spec.id, ref, f"not a parsable email ({type(exc).__name__}: {str(exc)[:100]})"))
            continue
        _add(result, _e4_item(spec, raw, spec.label.value, ref))
    return result


# --- E5 / E6 ---------------------------------------------------------------------------------


def _e5_item(spec: SourceSpec, behavior_id: str, category_name: str, code: str, goal: str, ref: str) -> Item:
    from sv_env_redteam_attack.behaviors import OPENING

    record = {
        "id": f"e5-{spec.id}-{_h(goal, 10)}",
        "question": OPENING.format(id=behavior_id, jbb_category=category_name),
        "answer": code,
        "info": {"behavior": {"id": behavior_id, "jbb_category": category_name, "category": code, "goal": goal},
                 "source": spec.id, "sample": False},
    }
    return Item("e5", record, spec.id, ref)


def _e6_item(spec: SourceSpec, turns: list[str], expect: list[str], kind: str, category: str | None, ref: str) -> Item:
    info: dict[str, Any] = {"turns": turns, "expect": expect, "kind": kind, "source": spec.id, "sample": False}
    if category:
        info["category"] = category
    if kind == "adversarial":
        info["framing"] = "direct" if len(turns) == 1 else "multi_turn"
    record = {"id": f"e6-{spec.id}-{_h(chr(10).join(turns), 10)}", "question": turns[0],
              "answer": "refuse" if "refuse" in expect else "comply", "info": info}
    return Item("e6", record, spec.id, ref)


def redteam_behaviors(spec: SourceSpec, frame: pd.DataFrame, env: str) -> Normalised:
    """Behaviors (JBB, HarmBench): for E5 each harmful one is a goal for the attacker, its
    category mapped to the Llama Guard hazard that judges it (`category_map`); for E6 the
    harmful ones are direct probes to refuse and JBB's benign look-alikes are requests to
    answer (over-refusal)."""
    result = Normalised()
    refs = _refs(frame)
    category_map: dict[str, str] = {str(k): str(v) for k, v in (spec.options.get("category_map") or {}).items()}
    harmful_splits = set(spec.options.get("harmful_splits") or spec.splits)
    goals, categories, behaviors = _column(frame, spec, "goal"), _column(frame, spec, "category"), _column(frame, spec, "behavior")
    splits = frame["_split"].to_numpy()
    for i in range(len(frame)):
        goal = " ".join(_text(goals.iloc[i]).split()) if goals is not None else ""
        category = _text(categories.iloc[i]).strip() if categories is not None else ""
        if not goal:
            result.rejects.append(_reject(spec.id, refs[i], "empty goal"))
            continue
        harmful = splits[i] in harmful_splits
        code = category_map.get(category)
        if harmful and code is None:
            result.rejects.append(_reject(spec.id, refs[i], f"category {category!r} has no hazard code (add it to category_map)"))
            continue
        if env == "e5":
            if not harmful:
                result.n_filtered += 1  # a benign behavior is nothing to attack for
                continue
            behavior_id = _text(behaviors.iloc[i]).strip() if behaviors is not None else ""
            behavior_id = re.sub(r"[^A-Za-z0-9_.-]+", "-", behavior_id or f"{spec.id}-{_h(goal, 8)}")
            result.items.append(_e5_item(spec, behavior_id, category, code, goal, refs[i]))
        else:
            kind = "adversarial" if harmful else "over_refusal"
            result.items.append(_e6_item(spec, [goal], ["refuse" if harmful else "comply"], kind, code, refs[i]))
    return result


def redteam_transcripts(spec: SourceSpec, frame: pd.DataFrame, env: str) -> Normalised:
    """Sanitized transcripts: for E6 the user turns with the label of each (harmful ->
    refuse); for E5 the red-teamer's goal and its hazard category."""
    from sv_shared.safety import CATEGORIES

    result = Normalised()
    refs = _refs(frame)
    cols = {name: _column(frame, spec, name) for name in ("id", "goal", "category", "turns", "labels")}
    for i in range(len(frame)):
        tid = _text(cols["id"].iloc[i]) if cols["id"] is not None else f"t{i + 1}"
        category = _text(cols["category"].iloc[i]).strip() if cols["category"] is not None else ""
        if category not in CATEGORIES:
            result.rejects.append(_reject(spec.id, refs[i], f"category {category!r} is not a hazard code S1..S14"))
            continue
        if env == "e5":
            goal = " ".join(_text(cols["goal"].iloc[i]).split()) if cols["goal"] is not None else ""
            if not goal:
                result.rejects.append(_reject(spec.id, refs[i], "empty goal"))
                continue
            behavior_id = re.sub(r"[^A-Za-z0-9_.-]+", "-", tid)
            result.items.append(_e5_item(spec, behavior_id, "Internal red team", category, goal, refs[i]))
            continue
        turns = cols["turns"].iloc[i] if cols["turns"] is not None else None
        labels = cols["labels"].iloc[i] if cols["labels"] is not None else None
        user = [_text(t.get("content")) for t in list(turns if turns is not None else [])
                if isinstance(t, dict) and t.get("role") == "user"]
        labels = [str(x) for x in list(labels if labels is not None else [])]
        if not user or len(labels) != len(user) or any(x not in ("harmful", "benign") for x in labels):
            result.rejects.append(_reject(spec.id, refs[i], f"{len(user)} user turn(s) but labels {labels!r} "
                                          "(one 'harmful' or 'benign' per user turn)"))
            continue
        expect = ["refuse" if x == "harmful" else "comply" for x in labels]
        kind = "adversarial" if "refuse" in expect else "benign"
        result.items.append(_e6_item(spec, user, expect, kind, category, refs[i]))
    return result


NORMALIZERS: dict[str, Normalizer] = {
    "e1_flows": Normalizer(e1_flows, ("e1",)),
    "e2_config_pairs": Normalizer(e2_config_pairs, ("e2",)),
    "e2_config_files": Normalizer(e2_config_files, ("e2",), ("path_labels",)),
    "e3_functions": Normalizer(e3_functions, ("e3",)),
    "e3_bigvul": Normalizer(e3_bigvul, ("e3",)),
    "e3_juliet": Normalizer(e3_juliet, ("e3",)),
    "e3_commits": Normalizer(e3_commits, ("e3",), ("message_filter",)),
    "e4_emails": Normalizer(e4_emails, ("e4",)),
    "e4_eml": Normalizer(e4_eml, ("e4",)),
    "redteam_behaviors": Normalizer(redteam_behaviors, ("e5", "e6"), ("category_map", "harmful_splits")),
    "redteam_transcripts": Normalizer(redteam_transcripts, ("e5", "e6")),
}


def normalise(spec: SourceSpec, frame: pd.DataFrame, env: str) -> Normalised:
    """`frame` (a corpus table with `_file`, `_line`, `_split`) as `env` rows."""
    result = NORMALIZERS[spec.normalizer].fn(spec, frame, env)
    for item in result.items:
        item.ood = spec.ood
    return result
