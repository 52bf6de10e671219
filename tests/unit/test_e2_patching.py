"""E2 patch application: unified diffs and JSON patches, and what is refused."""

from __future__ import annotations

import json

import pytest
import yaml

from sv_env_config_verification import PatchError, apply_patch, bundled_examples
from sv_env_config_verification.opa import OpaEvaluator

FILES = {e.filename: e.content for e in bundled_examples()}
PRIV = FILES["privileged-pod.yaml"]

GOOD_DIFF = """--- a/privileged-pod.yaml
+++ b/privileged-pod.yaml
@@ -15,3 +15,3 @@
       securityContext:
-        privileged: true
+        privileged: false
         allowPrivilegeEscalation: false
"""


def test_unified_diff_applies_and_fixes():
    patched = apply_patch("privileged-pod.yaml", PRIV, GOOD_DIFF)
    assert "privileged: false" in patched and "privileged: true" not in patched
    result = OpaEvaluator().evaluate("privileged-pod.yaml", patched)
    assert result.error is None and not result.findings


def test_diff_with_wrong_line_numbers_but_right_context_applies():
    shifted = GOOD_DIFF.replace("@@ -15,3 +15,3 @@", "@@ -3,3 +3,3 @@")
    assert "privileged: false" in apply_patch("privileged-pod.yaml", PRIV, shifted)


def test_headerless_hunk_means_the_task_file():
    hunk = GOOD_DIFF.split("\n", 2)[2]
    assert "privileged: false" in apply_patch("privileged-pod.yaml", PRIV, hunk)


@pytest.mark.parametrize(
    "patch,needle",
    [
        (GOOD_DIFF.replace("-        privileged: true", "-        privileged: maybe"), "does not match"),
        (GOOD_DIFF.replace("privileged-pod.yaml", "../../etc/passwd"), "escapes"),
        (GOOD_DIFF.replace("privileged-pod.yaml", "/etc/passwd"), "escapes"),
        (GOOD_DIFF.replace("privileged-pod.yaml", "other.yaml"), "only"),
        (GOOD_DIFF + GOOD_DIFF.replace("privileged-pod.yaml", "second.yaml"), "exactly one file"),
        ("this is not a diff at all", "not a valid unified diff"),
        ('[{"op": "replace", "path": "/nope/x", "value": 1}]', "does not apply"),
        ("[not json", "does not parse"),
        ("", "empty"),
    ],
)
def test_bad_patches_raise_patch_error(patch, needle):
    with pytest.raises(PatchError, match=needle):
        apply_patch("privileged-pod.yaml", PRIV, patch)


def test_json_patch_single_document():
    ops = [{"op": "replace", "path": "/spec/containers/0/securityContext/privileged", "value": False}]
    patched = apply_patch("privileged-pod.yaml", PRIV, json.dumps(ops))
    assert yaml.safe_load(patched)["spec"]["containers"][0]["securityContext"]["privileged"] is False
    assert apply_patch("privileged-pod.yaml", PRIV, ops) == patched  # a list works as well as its text


def test_json_patch_multi_document_uses_document_index():
    content = FILES["multi-doc-app.yaml"]
    ops = [{"op": "replace", "path": "/2/spec/template/spec/containers/0/image", "value": "example/shop:1.2.3"}]
    patched = apply_patch("multi-doc-app.yaml", content, ops)
    docs = list(yaml.safe_load_all(patched))
    assert len(docs) == 3 and docs[2]["spec"]["template"]["spec"]["containers"][0]["image"] == "example/shop:1.2.3"


def test_json_patch_refused_for_terraform():
    with pytest.raises(PatchError, match="YAML files only"):
        apply_patch("ebs-unencrypted.tf", FILES["ebs-unencrypted.tf"], [{"op": "add", "path": "/x", "value": 1}])


def test_terraform_diff():
    diff = """--- a/ebs-unencrypted.tf
+++ b/ebs-unencrypted.tf
@@ -4,3 +4,4 @@
   size              = 100
   type              = "gp3"
+  encrypted         = true
 }
"""
    patched = apply_patch("ebs-unencrypted.tf", FILES["ebs-unencrypted.tf"], diff)
    assert not OpaEvaluator().evaluate("ebs-unencrypted.tf", patched).findings
