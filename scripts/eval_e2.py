"""Custom E2 sweeps: the same Dagster run `make eval-e2` launches, with every option.

python scripts/eval_e2.py --models tool-oracle gpt-5-mini --n 20 --seed 7 --include-tools false
"""

import sys

from sv_dagster.cli import main

if __name__ == "__main__":
    sys.exit(main(["eval", "e2", *sys.argv[1:]]))
