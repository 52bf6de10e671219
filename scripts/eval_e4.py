"""Custom E4 sweeps: the same Dagster run `make eval-e4` launches, with every option.

python scripts/eval_e4.py --models heuristic gpt-5-mini --n 40 --seed 7
"""

import sys

from sv_dagster.cli import main

if __name__ == "__main__":
    sys.exit(main(["eval", "e4", *sys.argv[1:]]))
