"""The training process: `python -m sv_dagster.training.entry SPEC.json`.

Launched by a Dagster asset through Dagster Pipes (a subprocess here; a Kubernetes pod or
a Ray job elsewhere, same command), it streams its logs and step metrics back to the run
and reports the finished checkpoint's record. Run by hand it prints them instead.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def main(argv: list[str] | None = None) -> int:
    from dagster_pipes import PipesEnvVarParamsLoader, open_dagster_pipes

    from sv_dagster.core.evals.progress import StepProgress
    from sv_dagster.training.stages import StageSpec, run_stage

    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m sv_dagster.training.entry SPEC.json", file=sys.stderr)
        return 2
    spec = StageSpec.from_json(Path(argv[0]).read_text(encoding="utf-8"))
    logging.getLogger("transformers").setLevel(logging.ERROR)

    if not PipesEnvVarParamsLoader().is_dagster_pipes_process():  # run by hand

        def report(kind: str, payload: dict[str, Any]) -> None:
            print(json.dumps({"kind": kind, **payload}, default=str), flush=True)

        record = run_stage(spec, report)
        print(json.dumps({"kind": "checkpoint", "record": record}, default=str), flush=True)
        return 0

    with open_dagster_pipes() as pipes:
        steps = StepProgress(f"{spec.stage} {spec.env}", pipes.log.info)

        def report(kind: str, payload: dict[str, Any]) -> None:
            if kind == "start":
                steps.start(payload["step"], payload.get("max_steps"))
            elif kind == "metrics":
                # Raw step metrics stay in the event log (at DEBUG: tests and tools read them);
                # a person reads the throttled step line.
                pipes.log.debug("metrics " + json.dumps(payload, default=str, sort_keys=True))
                pipes.report_custom_message({"kind": "metrics", **payload})
                steps.metrics(payload)
            else:
                pipes.log.info(str(payload.get("message", payload)))

        pipes.log.info(f"{spec.stage} for {spec.env}: {spec.out_dir}")
        record = run_stage(spec, report)
        steps.finish()
        pipes.report_custom_message({"kind": "checkpoint", "record": record})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
