#!/usr/bin/env bash
# Install test needs and run lint, types, the import contract and the whole test suite.
# As root (as in CI) the namespace tests run for real; elsewhere they skip with a reason.
#
# The suite runs in two phases, side by side (dev/phases.sh says how); the script fails if
# either fails:
#   1. the `serial` tests (a rate, an RTT, a duration measured and judged) one at a time, at
#      the machine's normal priority;
#   2. every other test, on DTNKIT_TEST_WORKERS pytest-xdist workers (default 4: most tests wait
#      on real peers, namespaces and child processes, not on a core), in a cpu cgroup that has
#      a core only when the serial phase does not want it.  Tests that share a module- or
#      session-scoped fixture (a server, a lab path, SSH hosts) stay on one worker, which makes
#      it once (tests/conftest.py, `--dist loadgroup`).
# Each phase prints its 30 slowest tests; then the line coverage of both.
# The fuzzers (marker `fuzz`) try 1,000 cases each here; dev/nightly.sh runs them with
# 10,000 (DTNKIT_FUZZ, tests/support/fuzz.py).
# Arguments go to both phases, e.g. `dev/test.sh tests/tune -x`.
set -euo pipefail
cd "$(dirname "$0")/.."
dev/bootstrap.sh test

# Lint, types, the import contract (pyproject.toml) and the bytecode, side by side: they are
# independent, and mypy alone is most of their time.  Each one's output is printed whole, in
# this order, once all have ended; any failure stops the run before the tests.
# The bytecode is written once, here, and kept: with PYTHONDONTWRITEBYTECODE set (some CI
# images set it) every one of the hundreds of `dtnkit` child processes the tests start would
# compile the package again, and the workers would race to write it.
unset PYTHONDONTWRITEBYTECODE
checks=$(mktemp -d)
trap 'rm -rf "$checks"' EXIT
steps=(
  ".venv/bin/ruff check src tests bench"
  ".venv/bin/ruff format --check src tests bench"
  ".venv/bin/mypy"
  ".venv/bin/lint-imports --no-cache --no-logo"
  ".venv/bin/python -m compileall -q src tests bench"
)
pids=()
for i in "${!steps[@]}"; do
  ${steps[$i]} >"$checks/$i" 2>&1 &
  pids+=($!)
done
failed=0
for i in "${!steps[@]}"; do
  rc=0
  wait "${pids[$i]}" || rc=$?
  if [ "$i" -lt 4 ] || [ "$rc" -ne 0 ]; then cat "$checks/$i"; fi  # compileall: silent when fine
  if [ "$rc" -ne 0 ]; then
    echo "dev/test.sh: '${steps[$i]}' failed (exit $rc)" >&2
    failed=1
  fi
done
[ "$failed" -eq 0 ] || exit 1
rm -rf "$checks"
exec dev/phases.sh "$@"
