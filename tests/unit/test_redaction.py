"""The one redaction step: secret env values, registered keys and key-shaped text."""

from __future__ import annotations

import json
import logging

import pytest

from sv_dagster.core.artifacts.redaction import (
    REDACTED,
    RedactingLogRecords,
    install_log_redaction,
    redact,
    redact_text,
    register_secret,
    write_redacted,
)


@pytest.mark.parametrize(
    "leak",
    [
        "sk-proj-abcdefghijklmnopqrstuvwx",
        "sk-ant-api03-abcdefghijklmnopqrstuvwxyz",
        "AKIAIOSFODNN7EXAMPLE",
        "ghp_" + "a" * 36,
        "xoxb-1234567890-abcdef",
        "AIza" + "b" * 35,
        "hf_" + "c" * 34,
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----",
    ],
)
def test_key_shapes_are_removed_from_text(leak: str):
    cleaned = redact_text(f"error: Incorrect API key provided: {leak}. See docs.")
    assert leak not in cleaned and REDACTED in cleaned
    assert cleaned.startswith("error: Incorrect API key provided: ") and cleaned.endswith(". See docs.")


def test_bearer_tokens_and_secret_env_values(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "plain-token-value-42")
    text = "Authorization: Bearer abcdefghijklmnop1234 and plain-token-value-42"
    cleaned = redact_text(text)
    assert "abcdefghijklmnop1234" not in cleaned and "plain-token-value-42" not in cleaned


def test_registered_keys_are_redacted_whatever_their_variable_is_called():
    key = "zz-registered-0123456789"
    assert redact_text(f"echo {key}") == f"echo {key}"
    register_secret(key)
    assert redact_text(f"echo {key}") == f"echo {REDACTED}"
    register_secret("short")  # too short to be told from ordinary words
    assert redact_text("a short word") == "a short word"


def test_ordinary_text_is_untouched():
    text = '{"label": "Malicious", "rationale": "port 4444 scan; risk-based-prioritisation-of-alerts-here"}'
    assert redact_text(text) == text
    assert redact(json.loads(text)) == json.loads(text)


def test_a_private_key_body_goes_too_even_json_escaped_and_cut_off():
    key = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nBKcwggSjAgEAAoIBAQC7"
    for text in (f"leaked: {key} (truncated)", json.dumps({"error": f"leaked:\n{key}"})):
        cleaned = redact_text(text)
        assert "MIIEvQ" not in cleaned and "BKcwgg" not in cleaned and REDACTED in cleaned
    escaped = json.dumps({"error": f'{key}" and more'})  # an escaped quote right after the body
    assert json.loads(redact_text(escaped))["error"] == f'{REDACTED}" and more'


def test_redacted_json_stays_json():
    row = {"error": "401: Incorrect API key provided: sk-abcdefghijklmnopqrstuvwxyz0123", "n": 1}
    assert json.loads(redact_text(json.dumps(row)))["error"].endswith(REDACTED)


def test_text_artifacts_are_written_redacted(tmp_path):
    path = write_redacted(tmp_path / "report.md", "| gpt | sk-abcdefghijklmnopqrstuvwxyz0123 |\n")
    assert "sk-abc" not in path.read_text()


def test_log_records_are_redacted_before_any_handler_sees_them(caplog):
    previous = logging.getLogRecordFactory()
    try:
        install_log_redaction()
        install_log_redaction()  # idempotent: one wrapper
        factory = logging.getLogRecordFactory()
        assert isinstance(factory, RedactingLogRecords) and not isinstance(factory.inner, RedactingLogRecords)
        with caplog.at_level(logging.INFO):
            logging.getLogger("sv-test").info(
                "endpoint said %s", "Incorrect API key provided: sk-abcdefghijklmnopqrstuvwxyz"
            )
        assert caplog.records[-1].getMessage() == f"endpoint said Incorrect API key provided: {REDACTED}"
    finally:
        logging.setLogRecordFactory(previous)
