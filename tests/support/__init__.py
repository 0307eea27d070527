"""Helpers shared by tests and bench scripts (real peers: XRootD, gfal2, davix).

Import as ``tests.support.xrootd`` with the repository root on ``sys.path`` (pytest does that
through ``pythonpath = ["."]`` in pyproject.toml; a bench script inserts it itself).
"""
