"""Does a third-party copy reach an internal service, form by form?  The address-form table:
form -> decision -> reached the service, for pull and push, for one or two source trees.

A namespace whose loopback holds 10.0.0.5, fec0::5, the NAT64 form 64:ff9b::a00:5 and the
other special-purpose addresses, with an internal HTTP service listening on all of them and
counting every connection (tests/support/tpc_reach.py); a ``dtnkit serve`` without
``--tpc-allow`` in it is asked over a raw socket to COPY from and to each form.  Needs root.

    .venv/bin/python bench/bench_tpc_address_forms.py --baseline /tmp/old/src

(``/tmp/old`` from ``git archive`` of an older tree; without ``--baseline`` only this tree.)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.support
from tests.support.tpc_reach import internal_netns, run_forms

HERE = Path(__file__).resolve().parents[1] / "src"
VIA = " via redirect"


def cell(row: dict[str, Any], via: str = "") -> str:
    """'403 no' / '202 YES' for pull and push together when they agree."""
    pull, push = row["pull" + via], row["push" + via]

    def one(r: dict[str, Any]) -> str:
        return f"{r['status']} {'YES' if r['reached'] else 'no'}"

    return one(pull) if one(pull) == one(push) else f"{one(pull)} / {one(push)}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="an older tree's src directory")
    parser.add_argument("--prefix", default="dkforms", help="the namespace's name prefix")
    args = parser.parse_args()
    trees = ([("before", str(args.baseline))] if args.baseline else []) + [("now", str(HERE))]
    docs: dict[str, dict[str, Any]] = {}
    with internal_netns(args.prefix) as netns, tempfile.TemporaryDirectory() as tmp:
        for name, src in trees:
            docs[name] = run_forms(netns, Path(tmp) / name, pythonpath=src)
    print("decision: the COPY's HTTP status (202: started; 403: not allowed; 400: not a "
          "URL); reached: the internal service accepted a connection (pull and push "
          "alike unless shown apart)\n")
    head = "| form | host in the URL | " + " | ".join(
        f"{name}: status, reached | {name}, via a listed door's redirect" for name, _ in trees
    ) + " |"
    print(head)
    print("|---|---|" + "---|---|" * len(trees))
    for i, row in enumerate(docs[trees[0][0]]["forms"]):
        cells = [f"{cell(docs[name]['forms'][i])} | {cell(docs[name]['forms'][i], VIA)}"
                 for name, _ in trees]
        print(f"| {row['form']} | `{row['authority']}` | " + " | ".join(cells) + " |")
    for name, _ in trees:
        forms = docs[name]["forms"]
        for via, how in (("", "directly"), (VIA, "through the redirect")):
            reached = sum(1 for r in forms
                          if r["pull" + via]["reached"] or r["push" + via]["reached"])
            print(f"{name}: {reached} of {len(forms)} forms reached the service {how}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
