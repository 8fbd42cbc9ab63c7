"""``python -m genenv_engine``: the same headless command line as ``genenv``."""

import sys

from genenv_engine.interfaces.cli import main

sys.exit(main())
