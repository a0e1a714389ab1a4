"""``python -m experiments NAME [ARGS]``: run one study from a checkout (see ``experiments/README.md``).

Also runs as a plain script (``python experiments/__main__.py``), which is how the studies'
own ranks start under ``horovodrun``: the repository root goes onto ``sys.path`` and into
``PYTHONPATH`` so that ranks and subprocesses import the same ``experiments`` package.
"""
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)

from experiments import STUDIES, run_study  # noqa: E402
from tf_nmt.errors import UserError  # noqa: E402


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.splitlines()[0] + "\n\nstudies: " + ", ".join(STUDIES))
        return 0 if args else 2
    try:
        return run_study(args[0], args[1:])
    except UserError as err:
        print(f"experiments: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
