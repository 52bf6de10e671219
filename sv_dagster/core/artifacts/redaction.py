"""One redaction step for everything the pipeline writes: results rows, error texts,
metadata, reports and log records.

It removes the values of secret environment variables (names that look like secrets, and
every key a backend was configured with, whatever its variable is called) and text that
has the shape of a common API key or private key. A server that echoes the key in an
error body ("Incorrect API key provided: sk-...") must not get it into a results row.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

REDACTED = "<redacted>"

# Names that end like a secret ("OPENAI_API_KEY", "HF_TOKEN", "Authorization"), but not
# counters such as "max_tokens".
SECRET_NAME = re.compile(
    r"(api[_-]?key|secret[_-]?key|access[_-]?key|private[_-]?key|token|secret|password|passwd|authorization|credentials?)$",
    re.I,
)
# Key names that hold the *name* of a secret's env var, which is not itself secret.
SECRET_NAME_OK = re.compile(r"(_env|_var|_env_var|_name)$", re.I)

_TOKEN_SHAPES = (
    r"sk-[A-Za-z0-9_\-]{20,}",  # OpenAI / Anthropic style
    r"AKIA[0-9A-Z]{16}",  # AWS access key id
    r"gh[pousr]_[A-Za-z0-9]{36,}",  # GitHub tokens
    r"xox[abprs]-[A-Za-z0-9-]{10,}",  # Slack tokens
    r"AIza[0-9A-Za-z_\-]{35}",  # Google API keys
    r"hf_[A-Za-z0-9]{30,}",  # Hugging Face tokens
)
KEY_PATTERNS = re.compile(
    # A token shape must start a word: "risk-based-prioritisation-..." holds "sk-" too.
    r"(?<![A-Za-z0-9_\-])(?:" + "|".join(_TOKEN_SHAPES) + ")"
    # A private key's base64 body goes too, raw or JSON-escaped (backslash-n line breaks),
    # ended or cut off.
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----(?:[A-Za-z0-9+/=\s]|\\[nrt])*(?:-----END [A-Z ]*PRIVATE KEY-----)?"
    r"|(?<=Bearer )[A-Za-z0-9._~+/\-]{16,}=*"
)

MIN_SECRET_LENGTH = 8
"""Shorter values are not treated as secrets: replacing every "EMPTY" or "true" would
mangle ordinary text."""

_configured: set[str] = set()
_configured_lock = threading.Lock()


def register_secret(value: str | None) -> None:
    """A value to redact from now on in this process (a backend's API key)."""
    if value and len(value) >= MIN_SECRET_LENGTH:
        with _configured_lock:
            _configured.add(value)


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name)) and not SECRET_NAME_OK.search(name)


def secret_values(environ: Mapping[str, str] | None = None) -> set[str]:
    """Values of environment variables whose names look like secrets."""
    environ = os.environ if environ is None else environ
    return {value for name, value in environ.items() if is_secret_name(name) and len(value) >= MIN_SECRET_LENGTH}


def known_secrets() -> set[str]:
    """What this process redacts: secret-named environment variables and every key a
    backend registered."""
    with _configured_lock:
        return secret_values() | _configured


def redact_text(text: str, secrets: set[str] | None = None) -> str:
    """`text` with known secret values and key-shaped substrings replaced."""
    secrets = known_secrets() if secrets is None else secrets
    # Longest first, so a secret that contains another is removed whole.
    for secret in sorted(secrets, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, REDACTED)
    return KEY_PATTERNS.sub(REDACTED, text)


def redact(obj: Any, secrets: set[str] | None = None) -> Any:
    """A copy of `obj` (JSON-like) with secret-named keys, known secret values and
    key-shaped strings replaced."""
    secrets = known_secrets() if secrets is None else secrets
    if isinstance(obj, Mapping):
        return {
            key: REDACTED if isinstance(key, str) and is_secret_name(key) else redact(value, secrets)
            for key, value in obj.items()
        }
    if isinstance(obj, (list, tuple)):
        return [redact(value, secrets) for value in obj]
    if isinstance(obj, str):
        return redact_text(obj, secrets)
    return obj


class RedactingLogRecords:
    """A log record factory that redacts each record's message once it is formatted, so
    every handler (console, Dagster's event log, files) sees the same cleaned text."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __call__(self, *args: Any, **kwargs: Any) -> logging.LogRecord:
        record: logging.LogRecord = self.inner(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a malformed format string is logging's own problem to report
            return record
        cleaned = redact_text(message)
        if cleaned != message or record.args:
            record.msg, record.args = cleaned, None
        return record


def install_log_redaction() -> None:
    """Redact every log record this process creates from now on (idempotent)."""
    factory = logging.getLogRecordFactory()
    if not isinstance(factory, RedactingLogRecords):
        logging.setLogRecordFactory(RedactingLogRecords(factory))


def write_redacted(path: Path, text: str) -> Path:
    """Write a text artifact (report, notes, JSON) through the redaction step."""
    path.write_text(redact_text(text), encoding="utf-8")
    return path
