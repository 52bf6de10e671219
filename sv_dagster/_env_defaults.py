"""Environment defaults for every Python process in the project's virtualenv.

Imported at interpreter start by `sv_dagster_env.pth`, which `make setup` writes into the
venv's site-packages, so that `dagster job execute -j eval_e1` works exactly as written:
the Dagster instance is the project's own `.dagster/` unless DAGSTER_HOME is set, and the
CLI finds the code location without `-m`, and the security tools are found in `.venv-tools`. Values already set are never overridden.
"""

import os
import warnings
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("DAGSTER_HOME", str(_ROOT / ".dagster"))
os.environ.setdefault("DAGSTER_CLI_JOB_EXECUTE_MODULE_NAME", "sv_dagster.definitions")
# The CLI scanners live in their own venv (see Makefile); their results are cached under outputs/.
os.environ.setdefault("SV_TOOLS_BIN", str(_ROOT / ".venv-tools" / "bin"))
os.environ.setdefault(
    "SV_TOOL_CACHE", str(Path(os.environ.get("SV_OUTPUTS_DIR") or _ROOT / "outputs") / "cache" / "tools")
)
Path(os.environ["DAGSTER_HOME"]).mkdir(parents=True, exist_ok=True)
# `dagster job execute -j ...` (docs/commands.md) is the documented way to run a job; Dagster's
# notice that `dg launch` supersedes it is noise above every run's output.
warnings.filterwarnings("ignore", message=r"Function `job_execute_command` is superseded")
