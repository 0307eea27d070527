"""Run by path with a candidate Python (``PYTHON .../gfal2_importable.py``): exit 0 when that
Python can import gfal2's bindings, which the gfal-copy script needs (see
:func:`dtnkit.measure.tools.tpc.gfal_python`).  Imports nothing of dtnkit: the candidate is
the system's Python, where dtnkit is not installed."""

import gfal2  # type: ignore[import-not-found]  # noqa: F401
