"""Custom E5 sweeps: the same Dagster run `make eval-e5` launches, with every option.

python scripts/eval_e5.py --models gpt-5-mini --target llama-3.1-8b --n 20 --seed 7
"""

import sys

from sv_dagster.cli import main

if __name__ == "__main__":
    sys.exit(main(["eval", "e5", *sys.argv[1:]]))
