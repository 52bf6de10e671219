"""Write `sv_dagster_env.pth` into the running venv's site-packages (called by `make setup`).

The .pth imports `sv_dagster._env_defaults` at interpreter start (DAGSTER_HOME, the CLI's
code location, the tool venv and tool cache), and stays quiet where the project's source is
not visible, e.g. inside E3's sandbox, which hides the checkout.
"""

import sysconfig
from pathlib import Path

LINE = 'import sys; exec("try:\\n import sv_dagster._env_defaults\\nexcept ImportError:\\n pass")\n'

if __name__ == "__main__":
    target = Path(sysconfig.get_paths()["purelib"]) / "sv_dagster_env.pth"
    target.write_text(LINE, encoding="utf-8")
    print(f"wrote {target}")
