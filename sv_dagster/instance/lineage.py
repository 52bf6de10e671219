"""Lineage audit: from an asset's latest materialization back to the roots, read from the
Dagster instance's event log (never from files).

Every materialization carries the provenance that `sv_dagster.assets.recipe` records
(`input_data_versions` among it: the data version of each upstream asset it consumed).
For each parent in the asset graph we pick the materialization whose data version the
child recorded; where several share that version (same content, same hash) we prefer the
one Dagster's own input event pointer names, else the newest one written before the child.
Where no materialization of the parent has the recorded version we show the parent's
latest and mark it `matched=False`; a parent never materialized is a node with
`materialized=False`.

    node = lineage(instance, build_definitions(), "eval/e1/heuristic")
    print(format_lineage(node))
"""

from __future__ import annotations

import difflib
import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg

from sv_dagster.instance import DATA_VERSION_TAG, INPUT_DATA_VERSION_TAG

CODE_VERSION_TAG = "dagster/code_version"
INPUT_EVENT_POINTER_TAG = "dagster/input_event_pointer/"
NEVER = "never materialized"  # what `upstream_data_versions` records for a missing input

# Provenance facts beyond the common fields, kept in `details` where a materialization has them.
DETAIL_FIELDS: tuple[str, ...] = (
    "model_id",
    "model_name",
    "backend",
    "base_url",
    "sampling",
    "reward_config_hash",
    "dataset_split",
    "eval_run_id",
    "resumed_examples",
    "sample",
    "tools",
    "packages",
    "evals",
    "n_evals",
)

# Records of one asset read per lineage call (newest first); older ones are not searched.
MAX_RECORDS = 2000


class LineageError(Exception):
    """A lineage that cannot be built; the message is meant for the user."""


class UnknownAssetKeyError(LineageError, KeyError):
    def __init__(self, key: str, suggestions: list[str]):
        self.key = key
        self.suggestions = suggestions
        hint = f"; did you mean: {', '.join(suggestions)}" if suggestions else ""
        super().__init__(f"unknown asset key {key!r}{hint}")

    def __str__(self) -> str:  # KeyError would repr() the message
        return self.args[0]


@dataclass
class LineageNode:
    """One asset in the lineage tree and the materialization chosen for it."""

    key: str
    materialized: bool
    matched: bool | None = None
    """True: the materialization has the data version the child recorded as its input;
    False: none has, so the latest is shown; None: the requested asset itself."""
    match: str = "latest"
    """How it was chosen: latest | event_pointer | data_version | fallback_latest | none."""
    expected_data_version: str | None = None
    """The data version the child recorded for this input (None for the root)."""
    partition: str | None = None
    run_id: str | None = None
    storage_id: int | None = None
    timestamp: float | None = None
    data_version: str | None = None
    code_version: str | None = None
    """The asset's declared code version; None where Dagster only recorded the run id."""
    content_hash: str | None = None
    git_commit: str | None = None
    git_dirty: bool | None = None
    config_hash: str | None = None
    seed: int | None = None
    input_data_versions: dict[str, str] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    parents: list[LineageNode] = field(default_factory=list)

    @property
    def time_iso(self) -> str | None:
        if self.timestamp is None:
            return None
        return datetime.fromtimestamp(self.timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def walk(self):
        """This node and every node under it, depth first."""
        yield self
        for parent in self.parents:
            yield from parent.walk()

    def find(self, key: str) -> list[LineageNode]:
        return [node for node in self.walk() if node.key == key]


# ---------------------------------------------------------------- reading the event log


def _asset_graph(asset_graph_or_defs: Any):
    if isinstance(asset_graph_or_defs, dg.Definitions):
        return asset_graph_or_defs.resolve_asset_graph()
    return asset_graph_or_defs


def metadata_value(metadata: Mapping[str, Any], name: str) -> Any:
    if name not in metadata:
        return None
    entry = metadata[name]
    value = entry.value if isinstance(entry, dg.MetadataValue) else entry
    if isinstance(entry, dg.TextMetadataValue) and value == "null":
        return None  # how `recipe._metadata_value` stores None
    return value


def suggest_keys(key: str, known: list[str], n: int = 8) -> list[str]:
    """Known keys close to `key`: those under it or containing it, then fuzzy matches."""
    needle = key.strip("/").lower()
    contained = [k for k in known if needle and needle in k.lower()]
    fuzzy = difflib.get_close_matches(key, known, n=n, cutoff=0.6)
    out: list[str] = []
    for k in [*contained, *fuzzy]:
        if k not in out:
            out.append(k)
    return out[:n]


class _Log:
    """Materialization records of each asset, fetched once per lineage call."""

    def __init__(self, instance: dg.DagsterInstance):
        self.instance = instance
        self._cache: dict[tuple[dg.AssetKey, str | None], list[Any]] = {}

    def records(self, key: dg.AssetKey, partition: str | None = None) -> list[Any]:
        """Newest first."""
        cache_key = (key, partition)
        if cache_key not in self._cache:
            records: list[Any] = []
            cursor = None
            records_filter = dg.AssetRecordsFilter(
                asset_key=key, asset_partitions=[partition] if partition is not None else None
            )
            while len(records) < MAX_RECORDS:
                result = self.instance.fetch_materializations(
                    records_filter, limit=min(500, MAX_RECORDS - len(records)), cursor=cursor, ascending=False
                )
                records.extend(result.records)
                if not result.has_more:
                    break
                cursor = result.cursor
            self._cache[cache_key] = records
        return self._cache[cache_key]


def _tags(record: Any) -> dict[str, str]:
    return dict(record.event_log_entry.tags or {})


def _data_version(record: Any) -> str | None:
    return _tags(record).get(DATA_VERSION_TAG)


def _node_from_record(key: str, record: Any, **kwargs: Any) -> LineageNode:
    tags = _tags(record)
    metadata = record.asset_materialization.metadata if record.asset_materialization else {}
    code_version = tags.get(CODE_VERSION_TAG)
    if code_version == record.run_id:
        code_version = None  # Dagster's default when the asset declares none
    inputs = metadata_value(metadata, "input_data_versions")
    if not isinstance(inputs, Mapping):  # not recorded by provenance: Dagster's own tags
        inputs = {
            name[len(INPUT_DATA_VERSION_TAG) :]: version
            for name, version in tags.items()
            if name.startswith(INPUT_DATA_VERSION_TAG)
        }
    git_dirty = metadata_value(metadata, "git_dirty")
    seed = metadata_value(metadata, "seed")
    return LineageNode(
        key=key,
        materialized=True,
        partition=record.partition_key,
        run_id=record.run_id,
        storage_id=record.storage_id,
        timestamp=record.timestamp,
        data_version=tags.get(DATA_VERSION_TAG),
        code_version=code_version,
        content_hash=metadata_value(metadata, "content_hash"),
        git_commit=metadata_value(metadata, "git_commit"),
        git_dirty=git_dirty if isinstance(git_dirty, bool) else None,
        config_hash=metadata_value(metadata, "config_hash"),
        seed=seed if isinstance(seed, int) else None,
        input_data_versions={str(k): str(v) for k, v in inputs.items()},
        details={name: metadata_value(metadata, name) for name in DETAIL_FIELDS if name in metadata},
        **kwargs,
    )


def _choose_parent(child_record: Any, child: LineageNode, parent_key: str, records: list[Any]) -> tuple[Any, str]:
    """The parent materialization the child consumed, and how it was found."""
    expected = child.input_data_versions.get(parent_key)
    if expected is None:
        expected = _tags(child_record).get(INPUT_DATA_VERSION_TAG + parent_key)
    pointer = _tags(child_record).get(INPUT_EVENT_POINTER_TAG + parent_key)
    if expected and expected != NEVER:
        same = [r for r in records if _data_version(r) == expected]
        if same:
            if pointer is not None and pointer.isdigit():
                for record in same:
                    if record.storage_id == int(pointer):
                        return record, "event_pointer"
            before = [r for r in same if r.storage_id < child_record.storage_id]
            return (before or same)[0], "data_version"
    return records[0], "fallback_latest"


def _expand(graph: Any, log: _Log, node: LineageNode, record: Any, path: tuple[str, ...]) -> None:
    asset_key = dg.AssetKey.from_user_string(node.key)
    parent_keys = sorted(graph.get(asset_key).parent_keys, key=lambda k: k.to_user_string())
    for parent_asset_key in parent_keys:
        parent_key = parent_asset_key.to_user_string()
        if parent_key in path:  # cycles cannot happen in an asset graph; be safe anyway
            continue
        expected = node.input_data_versions.get(parent_key) or _tags(record).get(INPUT_DATA_VERSION_TAG + parent_key)
        records = log.records(parent_asset_key)
        if not records:
            node.parents.append(
                LineageNode(
                    key=parent_key, materialized=False, matched=None, match="none", expected_data_version=expected
                )
            )
            continue
        chosen, how = _choose_parent(record, node, parent_key, records)
        parent = _node_from_record(
            parent_key, chosen, matched=how != "fallback_latest", match=how, expected_data_version=expected
        )
        node.parents.append(parent)
        _expand(graph, log, parent, chosen, (*path, parent_key))


def lineage(
    instance: dg.DagsterInstance,
    asset_graph_or_defs: Any,
    key: str,
    partition: str | None = None,
    *,
    run_id: str | None = None,
    data_version: str | None = None,
) -> LineageNode:
    """The lineage tree of `key`'s latest materialization (of `partition`, if given), or of
    the one a run made (`run_id`, a prefix is enough) or with a data version (a prefix), at
    any age: a number in an old report traces to what fed it then.

    Raises `UnknownAssetKeyError` for a key not in the graph, `LineageError` for a partition
    given for an unpartitioned asset or a run / data version with no such materialization.
    An asset never materialized is returned as a node with `materialized=False` and no parents.
    """
    graph = _asset_graph(asset_graph_or_defs)
    asset_key = dg.AssetKey.from_user_string(key.strip().strip("/"))
    user_key = asset_key.to_user_string()
    if not graph.has(asset_key):
        known = sorted(k.to_user_string() for k in graph.get_all_asset_keys())
        raise UnknownAssetKeyError(key, suggest_keys(key, known))
    asset_node = graph.get(asset_key)
    if partition is not None and asset_node.partitions_def is None:
        raise LineageError(f"asset {user_key!r} is not partitioned; drop --partition")
    log = _Log(instance)
    records = log.records(asset_key, partition)
    if not records:
        return LineageNode(key=user_key, materialized=False, matched=None, match="none", partition=partition)
    chosen = [
        r
        for r in records
        if (run_id is None or r.run_id.startswith(run_id))
        and (data_version is None or (_data_version(r) or "").startswith(data_version))
    ]
    if not chosen:
        wanted = " and ".join(
            f"{name} {value}" for name, value in (("run", run_id), ("data version", data_version)) if value
        )
        recent = ", ".join(f"run {r.run_id[:8]} data version {(_data_version(r) or '-')[:12]}" for r in records[:3])
        raise LineageError(f"no materialization of {user_key!r} has {wanted}; its newest: {recent}")
    how = "latest" if chosen[0] is records[0] else "selected"
    root = _node_from_record(user_key, chosen[0], matched=None, match=how)
    _expand(graph, log, root, chosen[0], (user_key,))
    return root


# ---------------------------------------------------------------- output


def _short(value: str | None, n: int = 12) -> str:
    return "-" if not value else value[:n]


def _line(node: LineageNode) -> str:
    if not node.materialized:
        recorded = node.expected_data_version
        expected = f"  (child recorded {recorded if recorded == NEVER else _short(recorded)})" if recorded else ""
        return f"{node.key}  NEVER MATERIALIZED{expected}"
    parts = [node.key]
    if node.partition is not None:
        parts.append(f"partition={node.partition}")
    parts.append(f"data_version={_short(node.data_version)}")
    parts.append(f"content={_short(node.content_hash)}")
    if node.code_version:
        parts.append(f"code={node.code_version}")
    git = _short(node.git_commit, 7) if node.git_commit and node.git_commit != "unknown" else (node.git_commit or "-")
    parts.append(f"git={git}{'(+dirty)' if node.git_dirty else ''}")
    if node.config_hash:
        parts.append(f"config={_short(node.config_hash, 8)}")
    if node.seed is not None:
        parts.append(f"seed={node.seed}")
    if node.details.get("model_id"):
        parts.append(f"model={node.details['model_id']}({node.details.get('backend', '?')})")
    parts.append(f"run={_short(node.run_id, 8)}")
    parts.append(node.time_iso or "-")
    if node.matched is False:
        recorded = node.expected_data_version
        consumed = recorded if recorded is None or recorded == NEVER else _short(recorded)
        parts.append(f"UNMATCHED: child consumed {consumed or 'nothing recorded'}; showing latest")
    return "  ".join(parts)


def format_lineage(node: LineageNode) -> str:
    """An indented tree, one line per materialization: one reached again by another path is
    named, not repeated, and a node's never-materialized inputs share one line."""
    lines = [_line(node)]
    shown: set[tuple[str, int | None]] = {(node.key, node.storage_id)}

    def children(parent: LineageNode, prefix: str) -> None:
        done = [child for child in parent.parents if child.materialized]
        missing = [child.key for child in parent.parents if not child.materialized]
        entries: list[tuple[str, LineageNode | None]] = [(_line(child), child) for child in done]
        if missing:
            entries.append((f"NEVER MATERIALIZED ({len(missing)}): {', '.join(missing)}", None))
        for i, (text, child) in enumerate(entries):
            last = i == len(entries) - 1
            branch = prefix + ("└─ " if last else "├─ ")
            if child is not None and (child.key, child.storage_id) in shown:
                lines.append(f"{branch}{child.key}  (the same materialization as above)")
                continue
            lines.append(branch + text)
            if child is not None:
                shown.add((child.key, child.storage_id))
                children(child, prefix + ("   " if last else "│  "))

    children(node, "")
    return "\n".join(lines)


def lineage_json(node: LineageNode) -> dict[str, Any]:
    """JSON-ready dict of the tree (parents nested); `lineage_from_json` reads it back."""
    out: dict[str, Any] = {}
    for f in fields(node):
        value = getattr(node, f.name)
        if f.name == "parents":
            value = [lineage_json(parent) for parent in value]
        elif f.name == "details":
            value = json.loads(json.dumps(value, default=str))
        out[f.name] = value
    out["time"] = node.time_iso
    return out


def lineage_from_json(data: Mapping[str, Any]) -> LineageNode:
    names = {f.name for f in fields(LineageNode)}
    kwargs = {name: value for name, value in data.items() if name in names and name != "parents"}
    return LineageNode(**kwargs, parents=[lineage_from_json(p) for p in data.get("parents", [])])


# ---------------------------------------------------------------- CLI entry


def report_row_asset(report: Path, line: int) -> tuple[str, str, str]:
    """(asset key, run id prefix, data version prefix) of the table row at `line` of a
    report written by `sv_dagster.core.reporting.reports`."""
    from sv_dagster.core.reporting.audit import AuditError, report_file, table_rows

    try:
        path = report_file(report)
    except AuditError as error:
        raise LineageError(str(error)) from None
    rows = {row.line: row for row in table_rows(path.read_text(encoding="utf-8"))}
    row = rows.get(line)
    if row is None or row.table == "other":
        sourced = [n for n, r in rows.items() if r.table != "other"]
        raise LineageError(f"{path}:{line} is not a sourced table row; rows at lines {sourced[:12]}")
    if row.table == "training summary":
        raise LineageError(f"{path}:{line} is a sum over the training rows above it; give one of their lines")
    run, version = row.cells.get("run", "-"), row.cells.get("data version", "-")
    if run == "-":
        raise LineageError(f"{path}:{line} names no run (a report written before rows carried one)")
    if row.table == "tournament":
        pair = row.cells.get("pair", "-")
        if pair == "-":
            raise LineageError(f"{path}:{line} names no tournament pair (a report written before rows carried one)")
        return f"tournament/{pair.lower().replace('<->', '_')}", run, version
    if row.table == "training":
        return row.cells.get("asset", "-"), run, version
    env = row.cells.get("env") or row.env
    model = row.cells.get("model", "").removesuffix(" (sample)")
    return f"eval/{env}/{model}", run, version


def main_lineage(
    key: str,
    partition: str | None = None,
    as_json: bool = False,
    *,
    run_id: str | None = None,
    data_version: str | None = None,
    row: int | None = None,
    build_definitions: Callable[[], dg.Definitions],
) -> int:
    """`sv-dagster lineage KEY [--partition P] [--run R] [--data-version V] [--json]`, or
    `sv-dagster lineage REPORT --row LINE`: 0 printed, 2 on a key that is unknown or never
    materialized, or a run, version or row that names no materialization (message on stderr).
    `build_definitions` is the code location's (passed in: the definitions import this layer)."""
    try:
        if row is not None:
            key, run_id, data_version = report_row_asset(Path(key), row)
        defs = build_definitions()
        instance = dg.DagsterInstance.get()
    except LineageError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except dg.DagsterError as error:  # DAGSTER_HOME unset or its instance unreadable
        print(f"error: no Dagster instance: {error}", file=sys.stderr)
        return 2
    try:
        node = lineage(instance, defs, key, partition, run_id=run_id, data_version=data_version)
    except LineageError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if not node.materialized:
        where = f" (partition {partition!r})" if partition is not None else ""
        print(
            f"error: asset {node.key!r}{where} has never been materialized on the instance at "
            f"{getattr(instance, 'root_directory', '?')}; materialize it first (e.g. `dagster asset materialize "
            f"--select {node.key} -m sv_dagster.definitions`)",
            file=sys.stderr,
        )
        return 2
    if as_json:
        print(json.dumps(lineage_json(node), indent=2, sort_keys=True))
    else:
        print(format_lineage(node))
    return 0
