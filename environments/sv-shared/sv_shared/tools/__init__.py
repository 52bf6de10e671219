"""Security tools in one shape: findings, a content-addressed result cache, and batched
scanners for the CLI tools (Semgrep, Checkov, Bandit, KubeLinter)."""

from sv_shared.tools.cache import ToolCache, cache_key, default_cache
from sv_shared.tools.findings import SEVERITIES, SEVERITY_WEIGHTS, Finding, ToolResult, normalize_severity
from sv_shared.tools.scanners import MAX_FILE_BYTES, TOOLS, Scanner, ToolUnavailable, find_tool, ruleset_hash, tool_info

__all__ = [
    "MAX_FILE_BYTES",
    "SEVERITIES",
    "SEVERITY_WEIGHTS",
    "TOOLS",
    "Finding",
    "Scanner",
    "ToolCache",
    "ToolResult",
    "ToolUnavailable",
    "cache_key",
    "default_cache",
    "find_tool",
    "normalize_severity",
    "ruleset_hash",
    "tool_info",
]
