"""``python -m cresowlve_core.cli``: the ``cresowlve`` command."""

import sys

from cresowlve_core.cli import main

if __name__ == "__main__":  # importing this module (pkgutil.walk_packages) runs nothing
    sys.exit(main())
