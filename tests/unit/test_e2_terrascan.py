"""E2's Terraform fixtures one resource at a time: HCL blocks split as written (in the bounded
worker), each resource a task with the variables it uses, labelled by its source's folder
and never named after it; a file that is not HCL is a reject naming file and line."""

from __future__ import annotations

import pandas as pd
import pytest

from sv_env_config_verification.corpora import terraform_resources
from sv_env_config_verification.dataset import _example
from sv_env_config_verification.inputs import InputError, terraform_blocks
from sv_shared.corpora import LabelSpec, SourceSpec

FAIL = """/**
 * Template to validate encryption test
 */

variable "encryption" {
  default = "false"
}

variable "unused" {}

resource "aws_ebs_volume" "foo" {
  # Comment the line below to fail the KMS test
  encrypted = "${var.encryption}"
  tags = { Name = "${format("%s-x", "a")}" }
}

resource "aws_s3_bucket" "public_read" {
  acl = "public-read"
  website {
    routing_rules = <<EOF
[{"Condition": {"KeyPrefixEquals": "docs/"}}]
EOF
  }
}
"""


def test_blocks_are_split_as_written_comments_heredocs_and_interpolations_included():
    blocks = terraform_blocks(FAIL)
    assert [(b["kind"], b["labels"]) for b in blocks] == [
        ("variable", ["encryption"]),
        ("variable", ["unused"]),
        ("resource", ["aws_ebs_volume", "foo"]),
        ("resource", ["aws_s3_bucket", "public_read"]),
    ]
    ebs = blocks[2]["text"]
    assert ebs.startswith('resource "aws_ebs_volume" "foo" {') and ebs.endswith("}")
    assert "# Comment the line below" in ebs and '"${format("%s-x", "a")}"' in ebs
    assert blocks[3]["text"].count("EOF") == 2
    with pytest.raises(InputError, match="invalid HCL"):
        terraform_blocks('resource "a" "b" {\n  x = \n')


def _spec(**changes) -> SourceSpec:
    fields = dict(
        id="toy_fixtures",
        envs=("e2",),
        title="toy fixtures",
        loader="sdist",
        license="Apache-2.0",
        normalizer="e2_terraform_resources",
        sample={},
        label=LabelSpec(column="_split", map={"fail": "misconfigured", "success": "clean"}),
        test_only=True,
    )
    return SourceSpec(**(fields | changes))


def test_each_resource_is_a_task_with_its_variables_and_the_folder_as_its_label():
    frame = pd.DataFrame(
        [
            {
                "path": "tests/fail/main.tf",
                "text": FAIL,
                "_split": "fail",
                "_file": "pkg:tests/fail/main.tf",
                "_line": 1,
            },
            {
                "path": "tests/success/ok.tf",
                "text": 'resource "aws_s3_bucket" "b" {\n  acl = "private"\n}\n',
                "_split": "success",
                "_file": "f",
                "_line": 1,
            },
            {
                "path": "tests/fail/broken.tf",
                "text": 'resource "a" {\n',
                "_split": "fail",
                "_file": "pkg:tests/fail/broken.tf",
                "_line": 1,
            },
            {"path": "tests/README.md", "text": "# not terraform", "_split": "fail", "_file": "r", "_line": 1},
        ]
    )
    result = terraform_resources(_spec(), frame)
    records = [item.record for item in result.items]
    assert [r["filename"] for r in records] == [
        "aws_ebs_volume.foo.tf",
        "aws_s3_bucket.public_read.tf",
        "aws_s3_bucket.b.tf",
    ]
    assert [r["clean"] for r in records] == [False, False, True]
    ebs = records[0]["content"]
    assert ebs.startswith('variable "encryption" {') and 'variable "unused"' not in ebs  # only what it uses
    assert 'resource "aws_ebs_volume" "foo"' in ebs and "aws_s3_bucket" not in ebs
    assert all("fail" not in r["filename"] and "success" not in r["filename"] for r in records)  # no label leak
    assert all(r["test_source"] == "toy_fixtures" and r["id"].startswith("toy_fixtures-") for r in records)
    assert result.n_filtered == 1 and len(result.rejects) == 1
    assert result.rejects[0]["ref"].startswith("pkg:tests/fail/broken.tf:1 (tests/fail/broken.tf)")
    example = _example(records[0], "row")  # what E2's dataset reader makes of the row
    assert example.test_source == "toy_fixtures" and example.to_record()["test_source"] == "toy_fixtures"
    plain = terraform_resources(_spec(test_only=False), frame.iloc[:1])
    assert "test_source" not in plain.items[0].record
