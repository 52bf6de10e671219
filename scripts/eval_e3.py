"""Custom E3 sweeps: the same Dagster run `make eval-e3` launches, with every option.

python scripts/eval_e3.py --models heuristic gpt-5-mini --n 13 --seed 7
"""

import sys

from sv_dagster.cli import main

if __name__ == "__main__":
    sys.exit(main(["eval", "e3", *sys.argv[1:]]))
