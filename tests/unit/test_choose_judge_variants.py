"""The setting variants scripts/choose_judge.py tries each change one setting the learned judge
reads: a misspelled key would be ignored by training and score the chosen judge twice."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from sv_shared.safety.learned import SETTINGS

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "choose_judge.py"


def load_script():
    spec = importlib.util.spec_from_file_location("choose_judge", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_variant_changes_exactly_one_known_setting():
    variants = load_script().setting_variants(SETTINGS)
    assert len(variants) >= 2
    for name, settings in variants.items():
        assert set(settings) == set(SETTINGS), name
        changed = [key for key in SETTINGS if settings[key] != SETTINGS[key]]
        assert len(changed) == 1, (name, changed)
