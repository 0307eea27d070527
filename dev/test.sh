#!/usr/bin/env bash
# Install test needs and run lint, types, the import contract and the whole test suite.
# As root (as in CI) the namespace tests run for real; elsewhere they skip with a reason.
set -euo pipefail
cd "$(dirname "$0")/.."
dev/bootstrap.sh test
.venv/bin/ruff check src tests bench
.venv/bin/mypy
.venv/bin/lint-imports --no-cache --no-logo  # the import contract in pyproject.toml
.venv/bin/pytest -q "$@"
