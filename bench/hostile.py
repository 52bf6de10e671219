"""CPU cost of scoring hostile replies: each environment's real scoring path (`score_row`, as
the runner calls it) over the fuzz corpus of tests/support/hostile_replies.py, per reply.

Two ways, each in its own process so that nothing is warm from the other:

  shared      as the pipeline runs: each completion parsed once, the parse shared by the
              runner and every reward (`sv_shared.parsed_once`)
  per-reward  the alternative: the runner and each reward parse the reply again

Target: no reply costs more than 100 ms of the scoring thread's CPU time.

Usage: python bench/hostile.py ENV --n N --parse shared|per-reward   (prints one JSON line)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def parse_each_time() -> None:
    """Make `parsed_once` a no-op before any environment is imported."""
    import sv_shared
    import sv_shared.parsing

    def identity(parse, maxsize=128):
        return parse

    sv_shared.parsed_once = sv_shared.parsing.parsed_once = identity


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("env")
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--parse", choices=["shared", "per-reward"], default="shared")
    args = parser.parse_args()
    if args.parse == "per-reward":
        parse_each_time()
    from tests.support.hostile_replies import fuzz_scoring

    report = fuzz_scoring(args.env, args.n)
    cpu = sorted(report.cpu_s)
    print(
        json.dumps(
            {
                "env": args.env,
                "parse": args.parse,
                "replies": report.replies,
                "failures": len(report.failures),
                "wall_s": report.wall_s,
                "cpu_total_s": sum(cpu),
                "cpu_median_ms": statistics.median(cpu) * 1000,
                "cpu_p99_ms": cpu[int(0.99 * (len(cpu) - 1))] * 1000,
                "cpu_worst_ms": cpu[-1] * 1000,
                "worst_replies": [
                    {"cpu_ms": round(s * 1000, 1), "index": i, "starts": text} for s, i, text in report.worst
                ],
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
