"""Does a third-party copy reach an internal service, form by form?

A namespace whose loopback holds 10.0.0.5, fec0::5, the NAT64 form 64:ff9b::a00:5 and the other
special-purpose addresses, with an internal HTTP service listening on all of them and counting
every connection (tests/support/tpc_reach.py); a ``dtnkit serve`` without ``--tpc-allow`` in it
is asked over a raw socket to COPY from and to each form, directly and through a listed door
that redirects to the form.  The table: form -> the COPY's HTTP status (202 started, 403 not
allowed, 400 not a URL) -> whether the internal service saw a connection, for this tree and,
with ``--base REF``, for that tree too.  Needs root.  Not a timing: one round is the answer.
"""

from __future__ import annotations

from typing import Any

from tests.support.tpc_reach import internal_netns, run_forms

from bench.lib import Bench, Case

VIA = " via redirect"


def cell(row: dict[str, Any], via: str = "") -> str:
    """'403 no' / '202 YES' for pull and push together when they agree."""
    pull, push = row["pull" + via], row["push" + via]

    def one(r: dict[str, Any]) -> str:
        return f"{r['status']} {'YES' if r['reached'] else 'no'}"

    return one(pull) if one(pull) == one(push) else f"{one(pull)} / {one(push)}"


def run(b: Bench) -> int | None:
    trees = ([("base", b.base.src)] if b.base else []) + [("this", b.this.src)]
    docs: dict[str, dict[str, Any]] = {}
    with internal_netns(f"{b.prefix}f") as netns:
        work = b.workdir()
        for name, src in trees:
            docs[name] = run_forms(netns, work / name, pythonpath=str(src))
    head = ["form", "host in the URL"]
    for name, _ in trees:
        head += [f"{name}: status, reached", f"{name}: via redirect"]
    rows = []
    for i, row in enumerate(docs[trees[0][0]]["forms"]):
        cells = [row["form"], f"`{row['authority']}`"]
        for name, _ in trees:
            cells += [cell(docs[name]["forms"][i]), cell(docs[name]["forms"][i], VIA)]
        rows.append(cells)
    b.table(head, rows, title="COPY to each address form (pull and push alike unless shown apart)")
    reached = sum(1 for r in docs["this"]["forms"] if r["pull"]["reached"] or r["push"]["reached"])
    b.note(f"{reached} of {len(rows)} forms reached the internal service from this tree.")
    return 1 if reached else None


CASE = Case(run=run, rounds=1, needs_root=True, base="optional")
