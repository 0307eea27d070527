"""How many cases the fuzzers (the tests marked ``fuzz``) try: one setting for all of them.

``DTNKIT_FUZZ`` unset or ``ci``: 1,000 cases each (every CI run, a developer's run);
``nightly``: 10,000 each (``dev/nightly.sh``); a number: that many (a deeper hunt by hand, e.g.
``DTNKIT_FUZZ=100000``).  A "case" is one generated input: one request for the fuzzers over
raw sockets (sent in batches of 50), one document for the CLI's input fuzzers, one URL for the
COPY address table.  Anything else stops the run at import with the reason, so a typo never
quietly runs the small size in a nightly job.
"""

from __future__ import annotations

import os

CI = 1_000
NIGHTLY = 10_000


def cases(environ: dict[str, str] | None = None) -> int:
    """The number of cases each fuzzer tries in this run (see the module's docstring)."""
    text = (os.environ if environ is None else environ).get("DTNKIT_FUZZ", "ci").strip()
    if text in ("", "ci"):
        return CI
    if text == "nightly":
        return NIGHTLY
    if text.isdecimal() and int(text) > 0:
        return int(text)
    raise ValueError(
        f"DTNKIT_FUZZ={text!r}: expected 'ci' (1,000 cases a fuzzer), "
        f"'nightly' (10,000) or a positive number of cases"
    )


#: this run's size
CASES = cases()


def batches(batch: int) -> int:
    """How many batches of *batch* cases make this run's size (at least one)."""
    return max(1, -(-CASES // batch))
