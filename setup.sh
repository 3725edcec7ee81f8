#!/usr/bin/env bash
# Command 1 of the README: create .venv/, install the project, run the main job.
#   bash setup.sh            # set up + main job (embedded model unless CRESOWLVE_BASE_URL/MODEL are set)
#   bash setup.sh --no-run   # set up only
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
# Everything, through the known-good set (constraints.txt): the core and every extra (pyproject.toml).
# torch first, pinned: 2.13.0 is the local CPU wheel; anything looser pulls a ~3 GB CUDA build.
.venv/bin/python -m pip install --quiet -c constraints.txt "torch==2.13.0"
.venv/bin/python -m pip install --quiet -c constraints.txt -e ".[embedded,embeddings,ui,test]"
.venv/bin/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (cresowlve)" >/dev/null
echo "installed into .venv/"
if [ "${1:-}" != "--no-run" ]; then
  .venv/bin/cresowlve run
fi
