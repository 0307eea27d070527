"""Helpers shared by tests and bench cases (real peers: XRootD, gfal2, davix).

Import as ``tests.support.xrootd`` with the repository root on ``sys.path`` (pytest does that
through ``pythonpath = ["."]`` in pyproject.toml; ``python -m bench``, run from the repository
root, has it there).
"""
