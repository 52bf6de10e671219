"""The E2 prompt: the file, the answer schema and the tools; and reading a prompt back
(baselines see exactly what a model sees)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from sv_env_config_verification.answer import ANSWER_SCHEMA

SYSTEM_PROMPT = (
    "You are a cloud security reviewer. You find security misconfigurations in Kubernetes "
    "manifests and Terraform files, name them by the id the scanning tools use, and propose "
    "a minimal fix. Reply with a single JSON object and nothing else."
)

_KIND_TITLES = {"kubernetes": "Kubernetes manifest", "terraform": "Terraform file"}
_FENCE_LANG = {"kubernetes": "yaml", "terraform": "hcl"}
_FILE_LINE = re.compile(r"^File: `([^`\n]+)`$", re.MULTILINE)


def _fence(content: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", content)), default=0)
    return "`" * max(3, longest + 1)


def render_prompt(
    filename: str,
    content: str,
    kind: str,
    tools: Sequence[str],
    rules: Mapping[str, Mapping[str, str]],
    max_tool_calls: int,
) -> str:
    fence = _fence(content)
    body = content if content.endswith("\n") else content + "\n"
    lines = [
        f"Review this {_KIND_TITLES[kind]} for security misconfigurations.",
        "",
        f"File: `{filename}`",
        f"{fence}{_FENCE_LANG[kind]}",
        body + fence,
        "",
    ]
    if tools:
        calls = ", ".join(f"run_{t}" for t in tools)
        lines += [
            f"Tools you may call (at most {max_tool_calls} calls in all): {calls}. Each scans the file "
            "(or, if you pass `content`, a candidate patched version of it) and returns its findings as "
            "JSON with ids of the form <tool>/<rule>.",
            "",
        ]
    else:
        lines += ["No scanning tools are available for this task.", ""]
    if rules:
        lines.append("Rule ids of the project's OPA policies for this kind of file (id: severity, what it flags):")
        lines += [f"- opa/{rid}: {meta['severity']}, {meta['title']}" for rid, meta in sorted(rules.items())]
        lines.append("")
    lines += [
        "Answer with one JSON object:",
        ANSWER_SCHEMA,
        "List every violation the tools would report (by their ids), with its severity. `patch` fixes "
        "the file: a unified diff against the file above (`--- a/<file>` / `+++ b/<file>`), or for YAML "
        "an RFC 6902 JSON patch (a list of operations; for a multi-document file paths start with the "
        "document index). Use an empty string when no fix is needed. `confidence` is your probability "
        "that the violation list is complete and correct.",
    ]
    return "\n".join(lines)


def parse_prompt(prompt: str) -> tuple[str, str] | None:
    """(filename, content) from a rendered prompt, or None if it has no file block."""
    match = _FILE_LINE.search(prompt)
    if not match:
        return None
    rest = prompt[match.end() + 1 :]
    fence_match = re.match(r"(`{3,})[A-Za-z0-9_+-]*\n", rest)
    if not fence_match:
        return None
    fence = fence_match.group(1)
    body_start = fence_match.end()
    end = rest.find("\n" + fence + "\n", body_start - 1)
    if end < 0:
        end = rest.find("\n" + fence, body_start - 1)
        if end < 0:
            return None
    return match.group(1), rest[body_start : end + 1]
