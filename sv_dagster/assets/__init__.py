"""Asset definitions: short recipes over `sv_dagster.core`, declared with
`provenance_asset` so every materialization carries provenance."""
