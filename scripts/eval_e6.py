"""Custom E6 sweeps: the same Dagster run `make eval-e6` launches, with every option.

python scripts/eval_e6.py --models heuristic gpt-5-mini --n 40 --seed 7
"""

import sys

from sv_dagster.cli import main

if __name__ == "__main__":
    sys.exit(main(["eval", "e6", *sys.argv[1:]]))
