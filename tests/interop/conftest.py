"""Interop fixtures: one throwaway CA per module (real peers trust it, dtnkit serve uses it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.support.xrootd import Pki, make_pki

TOKENS = "rw-token read,write\nro-token read\n"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(Path(tmp_path_factory.mktemp("pki")))
