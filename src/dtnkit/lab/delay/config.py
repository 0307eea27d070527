"""The delay stage's config: each queue's one-way delay and loss, and the loss seed.

The JSON document and its rules are described in :mod:`dtnkit.lab.nfqdelay`; this module
validates it into a :class:`Config`, with one-line errors that say what is wrong and where.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_DELAY_MS = 10_000.0
DEFAULT_SEED = 1


@dataclass(frozen=True)
class QueueConfig:
    """One direction: its one-way delay and its drop probability."""

    delay_ms: float
    loss: float = 0.0


@dataclass(frozen=True)
class Config:
    """Queue number -> its delay and loss; the loss generators' seed."""

    queues: Mapping[int, QueueConfig]
    seed: int = DEFAULT_SEED

    def as_json(self) -> dict[str, Any]:
        return {
            "queues": {
                str(q): {"delay_ms": c.delay_ms, "loss": c.loss}
                for q, c in sorted(self.queues.items())
            },
            "seed": self.seed,
        }


def _number(value: object, what: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{what} must be a number, not {json.dumps(value)}")
    number = float(value)
    if not math.isfinite(number) or not low <= number <= high:
        raise ValueError(f"{what} is {value}, allowed {low:g} to {high:g}")
    return number


def parse_config(doc: object) -> Config:
    """Validate a decoded config document; ValueError says what is wrong and where."""
    if not isinstance(doc, dict):
        raise ValueError('the config must be a JSON object with "queues" (and "seed")')
    unknown = sorted(set(doc) - {"queues", "seed"})
    if unknown:
        raise ValueError(
            f"unknown {'key' if len(unknown) == 1 else 'keys'} "
            f"{', '.join(map(repr, unknown))}: "
            'allowed "queues" and "seed"'
        )
    seed = doc.get("seed", DEFAULT_SEED)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an integer, not {json.dumps(seed)}")
    raw = doc.get("queues")
    if not isinstance(raw, dict) or not raw:
        raise ValueError(
            '"queues" must be a non-empty object: {"0": {"delay_ms": 25, "loss": 0}, ...}'
        )
    queues: dict[int, QueueConfig] = {}
    for key, entry in raw.items():
        if not (
            isinstance(key, str) and key.isascii() and key.isdigit() and 0 <= int(key) <= 65535
        ):
            raise ValueError(f"queue {key!r}: the key must be a queue number 0..65535")
        where = f"queue {key}"
        if not isinstance(entry, dict):
            raise ValueError(f'{where}: must be an object with "delay_ms" and "loss"')
        extra = sorted(set(entry) - {"delay_ms", "loss"})
        if extra:
            raise ValueError(
                f"{where}: unknown {'key' if len(extra) == 1 else 'keys'} "
                f"{', '.join(map(repr, extra))}: "
                'allowed "delay_ms" and "loss"'
            )
        if "delay_ms" not in entry:
            raise ValueError(f'{where}: "delay_ms" is missing')
        delay = _number(entry["delay_ms"], f"{where}: delay_ms", 0.0, MAX_DELAY_MS)
        loss = _number(entry.get("loss", 0.0), f"{where}: loss", 0.0, 1.0)
        if int(key) in queues:
            raise ValueError(f"{where}: given twice")
        queues[int(key)] = QueueConfig(delay, loss)
    return Config(queues, seed)


def load_config(path: str | os.PathLike[str]) -> Config:
    """Read and validate a config file; raises ValueError with a one-line message."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from None
    try:
        return parse_config(doc)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
