"""The code location Dagster loads (webserver, daemon, `dagster job execute`, step workers).

Built at import, not lazily: the multiprocess executor's forkserver preloads this module
(executors.FORKSERVER_PRELOAD), so every step worker forks with the definitions already built.
A lazy `@dg.definitions` made each worker build them again, twice. Commands that build their own definitions import
`sv_dagster.assembly`, which builds nothing at import.
"""

from sv_dagster.assembly import OWNER, build_definitions, require_provenance

__all__ = ["OWNER", "build_definitions", "defs", "require_provenance"]

defs = build_definitions()
