"""The one base of every error a person can fix: a mistake in what they asked for or in a
file they edit, whose message is the line that names the fix. Command lines print such an
error as that line, without a traceback; any other exception is a fault and keeps its
traceback. Each subclass also keeps its builtin base (ValueError, RuntimeError), so callers
that catch those still do."""

from __future__ import annotations


class UserError(Exception):
    """A mistake a person can fix; the message is the one line they need."""
