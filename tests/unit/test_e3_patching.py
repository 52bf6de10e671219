"""E3 patch application: context-checked hunks, and every path a patch may not touch."""

from __future__ import annotations

import pytest

from sv_env_code_vulnerability.answer import parse_completion
from sv_env_code_vulnerability.patching import MAX_DIFF_CHARS, PatchError, apply_diff, apply_patch

FILES = {"app.py": "import os\n\n\ndef f(x):\n    return os.system('ls ' + x)\n"}
GOOD = """--- a/app.py
+++ b/app.py
@@ -1,5 +1,5 @@
-import os
+import subprocess
 
 
 def f(x):
-    return os.system('ls ' + x)
+    return subprocess.run(['ls', '--', x]).returncode
"""


def test_applies_and_counts():
    result = apply_patch(FILES, GOOD)
    assert (
        result.files["app.py"]
        == "import subprocess\n\n\ndef f(x):\n    return subprocess.run(['ls', '--', x]).returncode\n"
    )
    assert (result.added, result.removed, result.touched) == (2, 2, ("app.py",))


def test_wrong_line_numbers_and_counts_still_apply_where_context_matches():
    sloppy = GOOD.replace("@@ -1,5 +1,5 @@", "@@ -3,9 +3,2 @@")
    assert apply_diff(FILES, sloppy) == apply_diff(FILES, GOOD)


def test_context_mismatch_is_a_clear_error():
    bad = GOOD.replace("-    return os.system('ls ' + x)", "-    return os.system('rm ' + x)")
    with pytest.raises(PatchError, match="does not apply"):
        apply_diff(FILES, bad)


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("../app.py", "'..'"),
        ("/etc/passwd", "absolute"),
        ("other.py", "not one of the task's files"),
        ("sub/../app.py", "'..'"),
        ("test_security.py", "not one of the task's files"),
    ],
)
def test_paths_outside_the_task_are_refused(path, message):
    diff = GOOD.replace("a/app.py", f"a/{path}").replace("b/app.py", f"b/{path}")
    if path.startswith("/"):
        diff = GOOD.replace("--- a/app.py", f"--- {path}").replace("+++ b/app.py", f"+++ {path}")
    with pytest.raises(PatchError, match=message):
        apply_diff(FILES, diff)


def test_new_and_deleted_files_are_refused():
    new_file = "--- /dev/null\n+++ b/evil.py\n@@ -0,0 +1 @@\n+import os\n"
    with pytest.raises(PatchError, match="new file"):
        apply_diff(FILES, new_file)
    delete = (
        "--- a/app.py\n+++ /dev/null\n@@ -1,5 +0,0 @@\n-import os\n-\n-\n-def f(x):\n-    return os.system('ls ' + x)\n"
    )
    with pytest.raises(PatchError, match="deletes"):
        apply_diff(FILES, delete)


@pytest.mark.parametrize("diff", ["", "   ", "just prose, no diff", "--- a/app.py\n+++ b/app.py\n"])
def test_non_diffs_are_refused(diff):
    with pytest.raises(PatchError):
        apply_diff(FILES, diff)


def test_giant_diff_is_refused_before_parsing():
    giant = GOOD + "+x = 1\n" * (MAX_DIFF_CHARS // 6)
    with pytest.raises(PatchError, match="limit"):
        apply_diff(FILES, giant)


def test_parse_completion_json_fenced_and_garbage():
    import json

    parsed = parse_completion(json.dumps({"diff": GOOD, "explanation": "list args"}))
    assert (parsed.source, parsed.format_ok, parsed.diff) == ("json", True, GOOD)
    fenced = parse_completion(f"Here is the fix:\n```diff\n{GOOD}```\nDone.")
    assert (fenced.source, fenced.format_ok) == ("fenced_diff", False)
    assert apply_diff(FILES, fenced.diff) == apply_diff(FILES, GOOD)
    for junk in (None, "", "{not json", 42, '{"diff": 3}'):
        result = parse_completion(junk)
        assert result.diff is None and not result.format_ok and result.problems
        assert result.to_dict()["source"] == "none"
