"""What a security tool reports, in one shape for every tool (OPA, Semgrep, Checkov,
Bandit, KubeLinter), so environments compare findings across tools by id."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

SEVERITIES = ("low", "medium", "high")
SEVERITY_WEIGHTS = {"low": 1.0, "medium": 2.0, "high": 3.0}

_ALIASES = {
    "info": "low",
    "informational": "low",
    "note": "low",
    "low": "low",
    "warning": "medium",
    "warn": "medium",
    "medium": "medium",
    "moderate": "medium",
    "error": "high",
    "high": "high",
    "critical": "high",
}


def normalize_severity(value: object, default: str = "medium") -> str:
    """Map a tool's severity word (Semgrep ERROR/WARNING/INFO, Bandit HIGH/MEDIUM/LOW, ...)
    onto low|medium|high; unknown or missing -> `default`."""
    return _ALIASES.get(str(value).strip().lower(), default) if value is not None else default


@dataclass(frozen=True)
class Finding:
    tool: str
    rule: str
    severity: str = "medium"
    line: int | None = None
    message: str = ""

    @property
    def id(self) -> str:
        return f"{self.tool}/{self.rule}"

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Finding:
        return cls(
            tool=data["tool"],
            rule=data["rule"],
            severity=data.get("severity", "medium"),
            line=data.get("line"),
            message=data.get("message", ""),
        )


@dataclass(frozen=True)
class ToolResult:
    """One tool's verdict on one file. `error` set means the tool could not judge the file
    (parse error, timeout, too large, tool missing): its findings are not evidence of a
    clean file."""

    tool: str
    version: str
    ruleset_hash: str
    findings: tuple[Finding, ...] = ()
    error: str | None = None
    cached: bool = field(default=False, compare=False)
    """Where it came from, not what it says: a cached verdict equals a fresh one."""
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def ids(self) -> set[str]:
        return {f.id for f in self.findings}

    def to_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "version": self.version,
            "ruleset_hash": self.ruleset_hash,
            "findings": [f.to_dict() for f in self.findings],
            "error": self.error,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], cached: bool = False) -> ToolResult:
        return cls(
            tool=data["tool"],
            version=data["version"],
            ruleset_hash=data["ruleset_hash"],
            findings=tuple(Finding.from_dict(f) for f in data.get("findings", [])),
            error=data.get("error"),
            cached=cached,
        )
