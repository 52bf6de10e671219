"""Policy snapshots during GRPO: every N steps the weights are saved as a plain model folder,
so a dev-reward curve can be drawn afterwards with the same eval path every checkpoint uses.

Snapshots live beside the stage's folder (`<out>.snapshots/step-N/`), not in its partial
folder, so they outlive the stage's final rename. A run that starts afresh clears them; a
resumed one keeps those it made before it stopped and rewrites the ones it passes again.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

_STEP = re.compile(r"step-(\d+)")


def snapshots_dir(out: Path) -> Path:
    return out.with_name(out.name + ".snapshots")


def clear_snapshots(out: Path) -> None:
    shutil.rmtree(snapshots_dir(out), ignore_errors=True)


def snapshot_callback(out: Path, every: int, tokenizer: Any):
    """A TrainerCallback saving the model and tokenizer to `<out>.snapshots/step-N/` at every
    `every`-th step."""
    from transformers import TrainerCallback

    class Snapshots(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, **kwargs):
            if model is None or state.global_step % every:
                return control
            folder = snapshots_dir(out) / f"step-{state.global_step}"
            partial = folder.with_name(folder.name + ".partial")
            shutil.rmtree(partial, ignore_errors=True)
            model.save_pretrained(str(partial))
            tokenizer.save_pretrained(str(partial))
            shutil.rmtree(folder, ignore_errors=True)
            partial.rename(folder)  # a snapshot cut off mid-save is never listed
            return control

    return Snapshots()


def snapshot_record(out: Path, last_step: int) -> list[dict[str, Any]]:
    """The finished snapshots up to `last_step`, in step order."""
    found = []
    for folder in snapshots_dir(out).glob("step-*"):
        match = _STEP.fullmatch(folder.name)
        if match and int(match.group(1)) <= last_step:
            found.append((int(match.group(1)), folder))
    return [{"step": step, "path": str(folder)} for step, folder in sorted(found)]
