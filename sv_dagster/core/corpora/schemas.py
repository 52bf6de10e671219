"""What a row of each environment's dataset looks like, for curation and validation.

The environments own their schemas (their tasksets read the files); this module only says,
per environment, which fields are required, what the label, the scenario and the text of a
row are (the text is what is hashed for de-duplication and leakage checks), and where the
`sample` flag goes.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_NOT_WORD = re.compile(r"[\W_]+", re.UNICODE)
# ASCII fast path of `normalize_text` (most corpus text): every byte that is not a letter or a
# digit becomes a space, upper case becomes lower case; the same result as the regex path.
_ASCII_FOLD = bytes(
    (b + 32 if 65 <= b <= 90 else b) if chr(b).isalnum() else 32 for b in range(128)
) + b" " * 128


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()


def normalize_text(text: str) -> str:
    """The near-duplicate key: Unicode-normalised, case-folded, punctuation and spacing
    collapsed (so re-wrapped, re-cased or re-punctuated copies collide)."""
    if text.isascii():
        return b" ".join(text.encode("ascii").translate(_ASCII_FOLD).split()).decode("ascii")
    return _NOT_WORD.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def normalized_hash(text: str) -> str:
    return content_hash(normalize_text(text))


def bucket(key_hash: str) -> float:
    """A stable number in [0, 1) from a hex hash."""
    return int(key_hash[:12], 16) / float(16**12)


def split_for(key_hash: str, dev_frac: float, test_frac: float) -> str:
    """Stable split from a hash: an example never changes split when rows are added or
    removed elsewhere, and near-duplicates (same normalised hash) share one."""
    value = bucket(key_hash)
    return "test" if value < test_frac else "dev" if value < test_frac + dev_frac else "train"


def _info(row: dict[str, Any]) -> dict[str, Any]:
    info = row.get("info")
    return info if isinstance(info, dict) else {}


def _set_info_sample(row: dict[str, Any], sample: bool) -> None:
    if not isinstance(row.get("info"), dict):
        row["info"] = {}
    row["info"]["sample"] = sample


def _set_top_sample(row: dict[str, Any], sample: bool) -> None:
    row["sample"] = sample


def _set_meta_sample(row: dict[str, Any], sample: bool) -> None:
    if not isinstance(row.get("meta"), dict):
        row["meta"] = {}
    row["meta"]["sample"] = sample


def _e2_label(row: dict[str, Any]) -> str:
    clean = row.get("clean")
    return "clean" if clean is True else "misconfigured" if clean is False else "unknown"


def _e2_scenario(row: dict[str, Any]) -> str:
    name = str(row.get("filename") or "").lower()
    return "terraform" if name.endswith((".tf", ".hcl")) else "kubernetes"


@dataclass(frozen=True)
class RowSchema:
    name: str
    required: tuple[str, ...]
    label: Callable[[dict[str, Any]], Any]
    text: Callable[[dict[str, Any]], str]
    scenario: Callable[[dict[str, Any]], Any]
    mark_sample: Callable[[dict[str, Any], bool], None]
    sample_flag: Callable[[dict[str, Any]], Any]
    allowed_labels: tuple[str, ...] | None = None
    label_pattern: str | None = None


def _categories() -> tuple[str, ...]:
    from sv_shared.safety import CATEGORIES

    return tuple(CATEGORIES)


def row_schemas() -> dict[str, RowSchema]:
    """Schemas by name: e1..e6 (the tasksets' rows) and e3 corpus rows (fix pairs, functions)."""
    qa = ("id", "question", "answer", "info")
    return {
        "e1": RowSchema("e1", qa, lambda r: r.get("answer"), lambda r: str(r.get("question") or ""),
                        lambda r: _info(r).get("scenario"), _set_info_sample, lambda r: _info(r).get("sample"),
                        allowed_labels=("Benign", "Malicious")),
        "e2": RowSchema("e2", ("id", "filename", "content"), _e2_label, lambda r: str(r.get("content") or ""),
                        _e2_scenario, _set_top_sample, lambda r: r.get("sample"),
                        allowed_labels=("clean", "misconfigured", "unknown")),
        "e3": RowSchema("e3", ("id", "cwe", "module", "source", "functional_tests", "security_tests", "fix_diff"),
                        lambda r: r.get("cwe"), lambda r: str(r.get("source") or ""), lambda r: r.get("cwe"),
                        _set_meta_sample, lambda r: (r.get("meta") or {}).get("sample"),
                        label_pattern=r"^CWE-\d+$"),
        "e3_fix_pairs": RowSchema("e3_fix_pairs", ("id", "cwe", "language", "before", "after", "source"),
                                  lambda r: r.get("cwe"), lambda r: f"{r.get('before') or ''}\n{r.get('after') or ''}",
                                  lambda r: r.get("language"), _set_top_sample, lambda r: r.get("sample"),
                                  label_pattern=r"^(CWE-\d+|unknown)$"),
        "e3_functions": RowSchema("e3_functions", ("id", "code", "label", "language", "source"),
                                  lambda r: r.get("label"), lambda r: str(r.get("code") or ""),
                                  lambda r: r.get("source"), _set_top_sample, lambda r: r.get("sample"),
                                  allowed_labels=("vulnerable", "clean")),
        "e4": RowSchema("e4", qa, lambda r: r.get("answer"), lambda r: str(r.get("question") or ""),
                        lambda r: _info(r).get("scenario"), _set_info_sample, lambda r: _info(r).get("sample"),
                        allowed_labels=("Phishing", "Legitimate")),
        "e5": RowSchema("e5", qa, lambda r: r.get("answer"),
                        lambda r: str((_info(r).get("behavior") or {}).get("goal") or ""),
                        lambda r: (_info(r).get("behavior") or {}).get("jbb_category"), _set_info_sample,
                        lambda r: _info(r).get("sample"), allowed_labels=_categories()),
        "e6": RowSchema("e6", qa, lambda r: r.get("answer"),
                        lambda r: "\n".join(_info(r).get("turns") or [str(r.get("question") or "")]),
                        lambda r: _info(r).get("kind"), _set_info_sample, lambda r: _info(r).get("sample"),
                        allowed_labels=("refuse", "comply")),
    }
