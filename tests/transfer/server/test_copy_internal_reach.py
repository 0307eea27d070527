"""A COPY never reaches an internal service, whatever form its remote's address takes:
in a real namespace whose loopback holds 10.0.0.5, fec0::5, the NAT64 address
64:ff9b::a00:5, the 6to4 and Teredo forms of 10.0.0.5 and the other special-purpose
addresses (tests/support/tpc_reach.py), a ``dtnkit serve`` without ``--tpc-allow`` refuses
every form, pull and push, and the internal service accepts no connection at all; nor
when a door the allow-list names redirects the copy to the form.

With ``--tpc-allow 0.0.0.0/0 --tpc-allow ::/0`` (the admin allows everything) the same
forms do reach the service: the harness would see a connection if one were made, and an
allow-list entry still allows what the admin names.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.support import tpc_reach

pytestmark = [pytest.mark.needs_root, pytest.mark.needs_netns]
MODES = ("pull", "push", "pull via redirect", "push via redirect")


@pytest.fixture(scope="module")
def netns() -> Iterator[str]:
    with tpc_reach.internal_netns("dkreach") as name:
        yield name


def table(doc: dict[str, Any]) -> str:
    return "\n".join(
        f"{r['form']:28} {r['authority']:34} pull {r['pull']['status']} "
        f"reached={r['pull']['reached']} push {r['push']['status']} "
        f"reached={r['push']['reached']}"
        for r in doc["forms"]
    )


def test_no_form_of_an_internal_address_is_reached(netns: str, tmp_path: Path) -> None:
    doc = tpc_reach.run_forms(netns, tmp_path / "root")
    shown = table(doc)
    assert len(doc["forms"]) == len(tpc_reach.FORMS)
    reached = [
        f"{row['form']} ({mode}: {', '.join(row[mode]['requests']) or 'connected'})"
        for row in doc["forms"]
        for mode in MODES
        if row[mode]["reached"]
    ]
    assert reached == [], f"reached the service: {reached}\n{shown}"
    for row in doc["forms"]:
        for mode in ("pull", "push"):
            got = row[mode]
            # refused before anything is sent: 403 (not allowed), or 400 for a host that
            # is not a host (percent-encoding)
            want = 400 if row["form"] == "percent-encoded" else 403
            assert got["status"] == want, (row["form"], mode, got, shown)
        for mode in ("pull via redirect", "push via redirect"):
            got = row[mode]  # the door was asked; the redirect's target refused
            assert got["status"] == 202 and got["final"].startswith("failure:"), (
                row["form"],
                mode,
                got,
            )
    assert not list((tmp_path / "root").glob("pulled-*")), shown


def test_the_admin_allows_what_it_names(netns: str, tmp_path: Path) -> None:
    doc = tpc_reach.run_forms(netns, tmp_path / "root", ["0.0.0.0/0", "::/0"])
    shown = table(doc)
    for row in doc["forms"]:
        if row["form"] in ("percent-encoded", "multicast 224.0.0.5"):
            continue  # not a host; no host listens on a multicast address
        for mode in MODES:
            got = row[mode]
            assert got["reached"] and got["final"] == "success: Created", (
                row["form"],
                mode,
                got,
                shown,
            )
