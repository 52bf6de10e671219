"""`python -m sv_dagster.cli`: the same as `sv-dagster`."""

import sys

from sv_dagster.cli import main

sys.exit(main())
