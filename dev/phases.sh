#!/usr/bin/env bash
# Run the test suite's two phases, side by side; arguments go to both (`dev/phases.sh tests/tune`).
# dev/test.sh calls this after its checks; it needs the .venv dev/bootstrap.sh test makes.
#
#   serial    the tests marked `serial` (a rate, an RTT, a duration measured and judged), one at
#             a time, at the machine's normal priority.
#   parallel  every other test, on DTNKIT_TEST_WORKERS pytest-xdist workers (default 4), in a cpu
#             cgroup of its own whose `cpu.idle` is set while the serial phase runs: its
#             processes (and every child they start, in whatever session) get a core only
#             when no other task wants it, so a serial test meets no more of the suite's load
#             than a busy machine's other tenants bring; once the serial phase has ended the
#             cgroup is set back to normal.
# Without a writable cpu cgroup that has `cpu.idle` (not root, a kernel before 5.15) the phases
# run one after the other, parallel first; DTNKIT_TEST_PHASES=sequential asks for that too.
#
# The serial phase's output is printed after the parallel phase's.  Each prints its 30 slowest
# tests; then the line coverage of both (pytest-cov over the `dtnkit` package), whose data is
# left in COVERAGE_FILE (default .coverage) for `coverage html` and the like.  The script
# fails if either phase fails; SIGTERM or SIGINT ends both phases (each tears its tests down).
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d)
group=""
serial_pid=""
parallel_pid=""

idle_cgroup() {
  # a new cpu cgroup with cpu.idle set, cgroup v1 (the cpu hierarchy) or v2 (cpu enabled)
  local root=""
  if [ -e /sys/fs/cgroup/cpu/cpu.shares ]; then
    root=/sys/fs/cgroup/cpu
  elif grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; then
    root=/sys/fs/cgroup
  else
    return 1
  fi
  # an earlier run killed before its clean-up (SIGKILL) left its cgroup: removed once that
  # run's process is gone and the cgroup is empty (a live run's, another checkout's, is kept)
  local old pid dir
  for old in "$root"/dtnkit-test-phase-*; do
    [ -d "$old" ] || continue
    pid=${old##*/dtnkit-test-phase-}
    pid=${pid%%-*}
    kill -0 "$pid" 2>/dev/null && continue
    [ -z "$(cat "$old/cgroup.procs" 2>/dev/null)" ] && rmdir "$old" 2>/dev/null
  done
  dir="$root/dtnkit-test-phase-$$-$RANDOM"
  mkdir "$dir" 2>/dev/null || return 1
  if ! { [ -e "$dir/cpu.idle" ] && echo 1 >"$dir/cpu.idle"; } 2>/dev/null; then
    rmdir "$dir"
    return 1
  fi
  echo "$dir"
}

remove_group() {
  [ -n "$group" ] && [ -d "$group" ] || return 0
  # a process the parallel phase left behind goes back to the cgroup this script runs in;
  # after a SIGTERM one may still be exiting, or forking, for a moment: a few tries
  local home pid try
  home=$(dirname "$group")
  for try in 1 2 3 4 5 6 7 8 9 10; do
    while read -r pid; do
      echo "$pid" >"$home/cgroup.procs" 2>/dev/null || true
    done <"$group/cgroup.procs"
    rmdir "$group" 2>/dev/null && return 0
    sleep 0.5
  done
  echo "dev/phases.sh: could not remove $group (try $try)" >&2
}

stop() {
  # forward the signal to both phases (pytest tears down its running tests on SIGTERM)
  for pid in $serial_pid $parallel_pid; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  exit 143
}

cleanup() {
  remove_group
  rm -rf "$work"
}
trap cleanup EXIT
trap stop TERM INT

# each phase's coverage data in this run's own directory: another run of this script (a test
# of it, a second checkout's) never meets it
coverage_file=${COVERAGE_FILE:-.coverage}
parallel_cmd=(.venv/bin/pytest -q -n "${DTNKIT_TEST_WORKERS:-4}" --dist loadgroup -m "not serial"
  --durations=30 --cov=dtnkit --cov-report= "$@")
serial_cmd=(.venv/bin/pytest -q -m serial --durations=30 --cov=dtnkit --cov-report= "$@")

if [ "${DTNKIT_TEST_PHASES:-side-by-side}" != sequential ]; then
  group=$(idle_cgroup) || group=""
fi
parallel=0
serial=0
if [ -n "$group" ]; then
  echo "dev/phases.sh: the serial phase runs beside this one, which has a core only when" \
    "the serial phase does not want it ($group)"
  COVERAGE_FILE="$work/coverage.serial" "${serial_cmd[@]}" >"$work/serial" 2>&1 &
  serial_pid=$!
  # the parallel phase enters the idle cgroup before pytest starts: every worker and child
  # process it makes is born there
  COVERAGE_FILE="$work/coverage.parallel" sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' \
    phases "$group" "${parallel_cmd[@]}" &
  parallel_pid=$!
  wait "$serial_pid" || serial=$?
  serial_pid=""
  echo 0 >"$group/cpu.idle"
  wait "$parallel_pid" || parallel=$?
  parallel_pid=""
  echo
  echo "dev/phases.sh: the serial phase (it ran beside the one above):"
  cat "$work/serial"
else
  COVERAGE_FILE="$work/coverage.parallel" "${parallel_cmd[@]}" || parallel=$?
  COVERAGE_FILE="$work/coverage.serial" "${serial_cmd[@]}" || serial=$?
fi

# one coverage report for both phases (a phase that selected no test left no data)
data=()
for f in "$work/coverage.parallel" "$work/coverage.serial"; do [ -e "$f" ] && data+=("$f"); done
if ((${#data[@]})); then
  # a report, not a gate: its own failure (no data: no test imported dtnkit) is said, not fatal
  COVERAGE_FILE=$coverage_file .venv/bin/coverage combine -q "${data[@]}" &&
    COVERAGE_FILE=$coverage_file .venv/bin/coverage report --skip-covered ||
    echo "dev/phases.sh: no coverage report (above: why)" >&2
fi

# 5 is pytest's "no test selected": fine for one phase (`dev/phases.sh tests/tune` may select
# no serial test), not for both
if [ "$parallel" -eq 5 ] && [ "$serial" -eq 5 ]; then exit 5; fi
for rc in "$parallel" "$serial"; do
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then exit "$rc"; fi
done
