"""A reply in a Markdown ```json fence is read as the JSON inside it, by every environment
that parses replies, exactly as the bare JSON is: answer, format verdict and problems alike
(Qwen2.5-Coder-1.5B answers in a fence; SmolLM2 and the 0.5B answer bare)."""

from __future__ import annotations

import pytest

from sv_dagster.core.envs import ENVS

# One well-formed reply per environment that parses replies (a new one must add its own).
REPLIES = {
    "e1": '{"label": "Malicious", "confidence": 0.8, "rationale": "A scan of many ports."}',
    "e2": '{"violations": [{"id": "kube-linter/run-as-non-root", "severity": "high"}], '
    '"patch": null, "confidence": 0.7}',
    "e3": '{"diff": "--- a/users.py\\n+++ b/users.py\\n@@ -1 +1 @@\\n-a = 1\\n+a = 2\\n", '
    '"explanation": "Binds the value as a parameter."}',
    "e4": '{"label": "Phishing", "confidence": 0.9, "evidence": ["http://paypa1.com"]}',
}
PARSING = sorted(short for short, env in ENVS.items() if env.parse is not None)


def as_dict(parsed):
    return parsed.to_dict() if hasattr(parsed, "to_dict") else parsed


def test_every_parsing_environment_has_a_sample_reply() -> None:
    assert sorted(REPLIES) == PARSING


@pytest.mark.parametrize("short", PARSING)
@pytest.mark.parametrize("fence", ["```json\n{}\n```", "```\n{}\n```", "Here it is:\n```json\n{}\n```\nDone."])
def test_a_fenced_reply_is_read_as_the_json_inside(short: str, fence: str) -> None:
    parse = ENVS[short].parse
    bare = as_dict(parse(REPLIES[short]))
    assert as_dict(parse(fence.replace("{}", REPLIES[short]))) == bare
    assert bare.get("format_ok") is True, bare.get("problems")
