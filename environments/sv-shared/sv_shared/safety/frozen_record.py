"""The record of every freeze of the labelled set (append-only; see `frozen.py` for the rule).

A Python module rather than a data file so that it ships with the package as it is. Each
entry: the batch (note prefix) frozen, its row count and content hash, and the hash of the
rule/lexicon files at freezing time. The last entry is the frozen evaluation part.
"""

FREEZES: tuple[dict[str, object], ...] = (
    {
        # The batch's notes say it was written after the rules were frozen and never tuned
        # on; the record starts here, so rules_sha256 is the files as of this entry.
        "batch": "holdout5:",
        "n": 38,
        "sha256": "cb36c4e6000ed22cdb262f805f3f0a5b7db874366783d7af7a1658844824f20c",
        "rules_sha256": "ac879bc63b5653e2e1f88b4a8179c386685ca5eb45084b094749c437ececfcfe",
        "rules_version": "sv-rules-safety@2",
    },
)
