"""Evaluation: running an eval (runner, traces, tool calls), scoring summaries and statistics, the safety judge's agreement, the regression gate, triage and tournaments."""
