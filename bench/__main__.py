"""``python -m bench [CASE] [options]`` (from the repository root)."""

import sys

from bench.lib.core import main

sys.exit(main())
