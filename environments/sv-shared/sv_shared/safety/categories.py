"""Llama Guard 3's hazard taxonomy (MLCommons-based), the vocabulary every verdict uses.

Two spellings exist and both are kept: `CATEGORIES` has the names of the model card
("S3: Sex-Related Crimes"), `PROMPT_CATEGORY_NAMES` the short forms that the official chat
template actually puts into the prompt ("S3: Sex Crimes.") - the model was trained on the
latter, so `llamaguard.py` must send those.
"""

from __future__ import annotations

CATEGORIES: dict[str, str] = {
    "S1": "Violent Crimes",
    "S2": "Non-Violent Crimes",
    "S3": "Sex-Related Crimes",
    "S4": "Child Sexual Exploitation",
    "S5": "Defamation",
    "S6": "Specialized Advice",
    "S7": "Privacy",
    "S8": "Intellectual Property",
    "S9": "Indiscriminate Weapons",
    "S10": "Hate",
    "S11": "Suicide & Self-Harm",
    "S12": "Sexual Content",
    "S13": "Elections",
    "S14": "Code Interpreter Abuse",
}

PROMPT_CATEGORY_NAMES: dict[str, str] = {
    **CATEGORIES,
    "S3": "Sex Crimes",
    "S4": "Child Exploitation",
    "S11": "Self-Harm",
}


def category_sort_key(code: str) -> int:
    """S2 before S10 (numeric, not lexical, order)."""
    return int(code[1:]) if code[1:].isdigit() else 10_000


def normalise_categories(codes: object) -> tuple[str, ...]:
    """Sorted, de-duplicated S-codes; anything that is not a known code raises ValueError."""
    if isinstance(codes, str):
        codes = [c for c in codes.replace(" ", "").split(",") if c]
    if not isinstance(codes, (list, tuple, set, frozenset)):
        raise ValueError(f"categories must be a list of S-codes, got {type(codes).__name__}")
    out: set[str] = set()
    for code in codes:
        if not isinstance(code, str) or code.strip().upper() not in CATEGORIES:
            raise ValueError(f"unknown safety category {code!r} (known: S1..S14)")
        out.add(code.strip().upper())
    return tuple(sorted(out, key=category_sort_key))
