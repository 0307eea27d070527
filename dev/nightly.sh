#!/usr/bin/env bash
# The nightly run: the fuzzers (marker `fuzz`) at full size, 10,000 cases each
# (DTNKIT_FUZZ=nightly, tests/support/fuzz.py); every dev/test.sh (CI) run tries 1,000 of each.
# Arguments go to pytest, e.g. `dev/nightly.sh -x`.
set -euo pipefail
cd "$(dirname "$0")/.."
dev/bootstrap.sh test
DTNKIT_FUZZ=nightly exec .venv/bin/pytest -q -n "${DTNKIT_TEST_WORKERS:-4}" --dist loadgroup \
  -m fuzz --durations=10 "$@"
