"""The Prometheus text exposition format (0.0.4), written by hand: the mover's few series
need no library (``# HELP``, ``# TYPE``, one sample a line, ``\\n`` at the end)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass
class Family:
    """One metric: its name, type (counter|gauge), help text and samples."""

    name: str
    kind: str
    help: str
    samples: list[tuple[dict[str, str], float]] = field(default_factory=list)

    def add(self, value: float, **labels: str) -> Family:
        self.samples.append((labels, value))
        return self


def _escape(text: str, quote: bool) -> str:
    text = text.replace("\\", "\\\\").replace("\n", "\\n")
    return text.replace('"', '\\"') if quote else text


def _value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(float(value))


def render(families: Iterable[Family]) -> str:
    """The exposition of *families* (those without samples are left out)."""
    lines: list[str] = []
    for fam in families:
        if not fam.samples:
            continue
        lines.append(f"# HELP {fam.name} {_escape(fam.help, False)}")
        lines.append(f"# TYPE {fam.name} {fam.kind}")
        for labels, value in fam.samples:
            shown = ",".join(f'{k}="{_escape(v, True)}"' for k, v in sorted(labels.items()))
            lines.append(
                f"{fam.name}{{{shown}}} {_value(value)}" if shown else f"{fam.name} {_value(value)}"
            )
    return "\n".join(lines) + "\n" if lines else ""
