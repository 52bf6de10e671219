"""sv_shared.rewardconfig: every environment's reward TOML is read with the same rules and
error messages naming the file and the table."""

from __future__ import annotations

from pathlib import Path

import pytest

from sv_shared import RewardConfigError, read_reward_toml


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rewards.toml"
    path.write_text(text)
    return path


def test_weights_numbers_and_tables(tmp_path: Path):
    toml = read_reward_toml(write(tmp_path, "[weights]\na = 1.5\n[limits]\nn = 3\n"))
    assert toml.weights(("a", "b")) == {"a": 1.5, "b": 0.0}
    assert toml.number("limits", "n", 1, positive=True) == 3.0
    assert toml.number("missing", "x", 7.0) == 7.0
    assert toml.raw.startswith(b"[weights]")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[weights]\nc = 1\n", "unknown reward(s) ['c'] in [weights]"),
        ("[weights]\na = 'x'\n", "[weights]: 'a' must be a finite number"),
        ("[weights]\na = true\n", "'a' must be a finite number"),
        ("[weights]\na = nan\n", "'a' must be a finite number"),
        ("[weights\n", "not valid TOML"),
        ("weights = 3\n", "[weights] must be a table"),
    ],
)
def test_errors_name_the_file_and_table(tmp_path: Path, text: str, message: str):
    path = write(tmp_path, text)
    with pytest.raises(RewardConfigError) as caught:
        read_reward_toml(path).weights(("a", "b"))
    assert message in str(caught.value) and str(path) in str(caught.value)


def test_positive_and_known_keys(tmp_path: Path):
    toml = read_reward_toml(write(tmp_path, "[sandbox]\ncpu_s = 0\nextra = 1\n"))
    with pytest.raises(RewardConfigError, match=r"\[sandbox\]: 'cpu_s' must be > 0"):
        toml.number("sandbox", "cpu_s", 10, positive=True)
    with pytest.raises(RewardConfigError, match=r"unknown key\(s\) \['extra'\]"):
        toml.table("sandbox", ("cpu_s",))
    with pytest.raises(RewardConfigError, match="not found"):
        read_reward_toml(Path(tmp_path / "nope.toml"))
