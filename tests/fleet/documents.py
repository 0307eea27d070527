"""Documents for the fleet report's tests, made by the real commands where they can be:
audits by `dtnkit tune audit --format json` (of a captured host tree, or of a namespace),
and a campaign and an experiment in the shapes FLEET20 and `dtnkit experiment` give (synthetic:
marked so by their numbers)."""

from __future__ import annotations

import copy
import functools
import io
import json
from pathlib import Path
from typing import Any

from dtnkit.cli import main as cli_main
from dtnkit.environment import Environment

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"


def dtnkit(tmp: Path, *argv: str, columns: int = 80) -> tuple[int, str, str]:
    """`dtnkit ARGV` in this process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    env = Environment(
        state_dir=tmp / "state",
        results_db=tmp / "r.sqlite",
        stdout=out,
        stderr=err,
        terminal_width=columns,
    )
    return cli_main.main(list(argv), env), out.getvalue(), err.getvalue()


@functools.cache
def _tree_audit_text(name: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    env = Environment(stdout=out, stderr=err)
    code = cli_main.main(["tune", "audit", "--tree", str(HOSTS / name), "--format", "json"], env)
    assert code in (0, 3), err.getvalue()
    return out.getvalue()


def tree_audit(name: str = "dtn-b") -> dict[str, Any]:
    """The real audit of a captured host tree (a fresh copy to change)."""
    return copy.deepcopy(json.loads(_tree_audit_text(name)))


def compliant(doc: dict[str, Any]) -> dict[str, Any]:
    """The audit as if every item complied (current = recommended)."""
    doc = copy.deepcopy(doc)
    for f in doc["findings"]:
        if f["status"] in ("differs", "unknown"):
            f["status"], f["current"] = "ok", f["recommended"]
    doc["compliant"] = True
    return doc


def write(directory: Path, name: str, doc: Any) -> Path:
    path = directory / name
    path.write_text(json.dumps(doc, indent=1))
    return path


def verdict(group: str, verdict: str, ratio: float | None) -> dict[str, Any]:
    base = [5.0e9, 5.1e9, 4.9e9]
    return {
        "group": group,
        "verdict": verdict,
        "applied": verdict not in ("gated",),
        "ratio": ratio,
        "margin": None if ratio is None else 0.04,
        "baseline_bps": base if ratio is not None else [],
        "applied_bps": [b * ratio for b in base] if ratio is not None else [],
        "why": {
            "helps": "above the noise",
            "neutral": "within the noise",
            "harmful": "below the noise",
            "gated": "NIC headroom under 20%",
        }[verdict],
    }


def campaign(a: str, b: str, c: str) -> dict[str, Any]:
    """A finished campaign on two pairs, every verdict once (FLEET20's dtnkit.campaign/1)."""
    return {
        "schema": "dtnkit.campaign/1",
        "profile": "dtn",
        "groups": ["buffers", "congestion", "rings"],
        "started": 1764590000.0,
        "finished": 1764590750.5,
        "status": "done",
        "failure": None,
        "pairs": [
            {
                "client": a,
                "server": b,
                "nic_bps": 1e10,
                "results": [
                    verdict("buffers", "helps", 1.42),
                    verdict("congestion", "harmful", 0.81),
                    verdict("rings", "gated", None),
                ],
            },
            {
                "client": c,
                "server": a,
                "nic_bps": None,
                "results": [
                    verdict("buffers", "neutral", 1.01),
                    verdict("congestion", "helps", 1.2),
                ],
            },
        ],
        "restored": [a, b, c],
    }


def experiment(a: str, b: str) -> dict[str, Any]:
    """`dtnkit experiment --both-ends --format json`'s shape (diagnose/experiment.py)."""
    return {
        "id": "exp-20261201T101010-ab12",
        "started": 1764583810.0,
        "spec": {
            "groups": ["buffers", "pacing"],
            "probe": "net",
            "repeat": 3,
            "both_ends": True,
            "rtt_ms": 100.0,
            "profile": "dtn",
            "hosts": [a, b],
        },
        "groups": [
            {**verdict("buffers", "helps", 1.3), "changes": []},
            {
                "group": "pacing",
                "verdict": "neutral",
                "applied": False,
                "why": "nothing to apply: the hosts already comply",
                "baseline_bps": [5e9],
                "applied_bps": [],
                "ratio": None,
                "margin": None,
                "changes": [],
            },
        ],
        "helped": ["buffers"],
        "finished": 1764584000.0,
        "next": [],
    }
