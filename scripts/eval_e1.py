"""Custom E1 sweeps: the same Dagster run `make eval-e1` launches, with every option.

python scripts/eval_e1.py --models heuristic gpt-5-mini --n 20 --seed 7 --split dev
"""

import sys

from sv_dagster.cli import main

if __name__ == "__main__":
    sys.exit(main(["eval", "e1", *sys.argv[1:]]))
