"""The safety judges side by side: speed, agreement and what each costs the red-team evals.

For each judge a `[classifier]` table can name without a server (rules, learned; an LLM judge
served on loopback joins as one more entry of `JUDGES`):

- texts/s of `classify_many` over the external test's 395 (request, response) pairs, on ONE
  pinned core, repeated for 3 s at least (the responses are PyRIT's, 1,400 characters on
  average: longer than the bundled labelled texts bench/safety.py times);
- agreement on the external test (accuracy, kappa, unsafe recall with 95% CIs; labels written
  by other people, never tuned on) and the development kappa recorded with the judge choice
  (configs/safety/judge_choice.json);
- the wall time of the E5 and E6 evals of the rule baselines (the demo's `heuristic` models,
  every bundled test example) with the environment's rewards.toml pointed at that judge, in
  this process, after one warm-up run of each (the judge built, its model loaded).

Usage: python bench/judges.py [--write]   (prints JSON; --write records it as
bench/results/<date>-judges.json)
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.record import bench_record, write_record  # noqa: E402
from bench.safety import _pin_to_one_core, _rate  # noqa: E402

JUDGES = ("rules", "learned")
ENVS = {"e5": "sv_env_redteam_attack", "e6": "sv_env_redteam_defense"}


def _rewards_with(kind: str, package: str, folder: Path) -> Path:
    """The package's rewards.toml with its `[classifier]` table naming `kind`."""
    text = (resources.files(package) / "rewards.toml").read_text(encoding="utf-8")
    table = re.compile(r"^\[classifier\]\n(?:(?!\[).*\n?)*", re.MULTILINE)
    replaced = f'[classifier]\nkind = "{kind}"\n\n'
    text = table.sub(replaced, text) if table.search(text) else text + "\n" + replaced
    path = folder / f"{package}-{kind}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def eval_seconds(short: str, kind: str, folder: Path) -> tuple[float, int]:
    """(wall seconds, examples) of one eval of the rule baseline with the judge `kind`."""
    from sv_dagster.core.envs import ENVS as INSTALLED
    from sv_dagster.core.evals.evaluation import evaluate
    from sv_dagster.core.models.backends import make_backend
    from sv_dagster.core.models.registry import ModelSpec

    env = INSTALLED[short]
    spec = ModelSpec(name="heuristic", backend="heuristic", model="heuristic")
    counterpart = make_backend(spec, env.counterpart_env) if env.counterpart_env else None
    started = time.perf_counter()
    run = evaluate(
        env,
        spec,
        make_backend(spec, env.env_id),
        dataset_path=None,
        outputs_root=folder / "outputs",
        run_id=f"{short}-{kind}-{time.monotonic_ns()}",
        counterpart=counterpart,
        counterpart_model=None,
        reward_config=_rewards_with(kind, ENVS[short], folder),
    )
    seconds = time.perf_counter() - started
    return seconds, sum(1 for _ in run.results_path.open(encoding="utf-8"))


def judge_figures(kind: str, seconds: float = 3.0) -> dict:
    from sv_dagster.core.data.external_labels import external_test
    from sv_dagster.core.evals.judge_choice import read_choice
    from sv_dagster.core.evals.judge_validation import external_report
    from sv_shared.redteam import make_classifier

    started = time.perf_counter()
    judge = make_classifier({"kind": kind})
    build_s = time.perf_counter() - started
    test = external_test()
    items = [(r.text, r.context, r.role) for r in test.rows]
    judge.classify_many(items[:20])  # warm-up (the learned judge's compiled form)
    rate, done = _rate(judge, items, seconds)
    report = external_report(judge, test)
    choice = read_choice()
    development = next((c for c in choice["candidates"].values() if c.get("kind") == kind), {})
    return {
        "classifier": judge.ident,
        "build_or_load_s": round(build_s, 2),
        "texts_per_s": round(rate, 1),
        "texts_classified": done,
        "mean_chars": round(sum(len(t) + len(c or "") for t, c, _ in items) / len(items), 1),
        "external": {k: report[k] for k in ("n", "accuracy", "cohen_kappa", "unsafe_recall", "ci95", "validated")},
        "development_kappa": development.get("cohen_kappa"),
        "development_how": development.get("how"),
    }


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="write bench/results/<date>-judges.json")
    args = parser.parse_args(argv)
    cpu = _pin_to_one_core()
    results: dict = {"judges": {}, "pinned_cpu": cpu}
    for kind in JUDGES:
        results["judges"][kind] = judge_figures(kind)
    with tempfile.TemporaryDirectory(prefix="sv-bench-judges-") as tmp:
        for kind in JUDGES:
            for short in ENVS:
                eval_seconds(short, kind, Path(tmp))  # warm-up: datasets read, judge loaded
                wall, n = eval_seconds(short, kind, Path(tmp))
                results["judges"][kind][f"{short}_eval_s"] = round(wall, 2)
                results["judges"][kind][f"{short}_eval_examples"] = n
    results["eval_note"] = (
        "in-process evals of the rule baselines (heuristic attacker/target/defender) on the bundled test data; "
        "a served model's evals add its generation time on top, the judge's cost per text is the same"
    )
    print(json.dumps(results, indent=2))
    if args.write:
        out = write_record(bench_record("python bench/judges.py --write", results), "judges")
        print(f"written to {out.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
