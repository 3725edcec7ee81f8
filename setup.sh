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
# A download cut off midway (a flaky link to the package index) is resumed by pip; when pip still
# gives up, the whole install is tried again, up to 3 times, 30 s and 60 s apart. Wheels already
# downloaded come from pip's cache on the next try. A real error (a conflict) fails 3 times, then stops.
pip_install() {
  local attempt
  for attempt in 1 2 3; do
    if .venv/bin/python -m pip install "$@"; then
      return 0
    fi
    if [ "$attempt" = 3 ]; then
      echo "setup.sh: pip install $* failed 3 times" >&2
      return 1
    fi
    echo "setup.sh: pip install failed (attempt $attempt of 3); trying again in $((attempt * 30)) s" >&2
    sleep $((attempt * 30))
  done
}
pip_install --quiet --upgrade pip
# Everything, through the known-good set (constraints.txt): the core and every extra (pyproject.toml).
# torch first, pinned: 2.13.0 is the local CPU wheel; anything looser pulls a ~3 GB CUDA build.
pip_install --quiet --resume-retries 20 -c constraints.txt "torch==2.13.0"
pip_install --quiet --resume-retries 20 -c constraints.txt -e ".[embedded,embeddings,ui,test]"
.venv/bin/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (cresowlve)" >/dev/null
echo "installed into .venv/"
if [ "${1:-}" != "--no-run" ]; then
  .venv/bin/cresowlve run
fi
