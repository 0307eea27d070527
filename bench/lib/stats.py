"""Measuring as an experiment: interleaved rounds, medians with their spread, ratios of the same
round (paired), and the noise of the machine from A/A rounds (a command against itself)."""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

ORDERS = ("alternate", "random")
#: the name of a measurement's second copy in the same round (its A/A twin)
AA_SUFFIX = " (A/A)"


def aa(name: str) -> str:
    """The A/A twin of measurement *name*."""
    return name + AA_SUFFIX


def round_order(names: Sequence[str], k: int, order: str = "alternate", seed: int = 0) -> list[str]:
    """Round k's order: ``alternate`` as listed, reversed every other round (drift hits both
    sides alike); ``random`` shuffled, the same for the same seed and round."""
    if order == "alternate":
        return list(names) if k % 2 == 0 else list(reversed(names))
    if order == "random":
        shuffled = list(names)
        random.Random(seed * 1_000_003 + k).shuffle(shuffled)
        return shuffled
    raise ValueError(f"order {order!r}: one of {', '.join(ORDERS)}")


def with_aa(names: Sequence[str], twins: Iterable[str]) -> list[str]:
    """*names* with the A/A twin of each of *twins* right after it."""
    want = set(twins)
    return [x for n in names for x in ((n, aa(n)) if n in want else (n,))]


@dataclass
class Samples:
    """Values by measurement and round (a failed run is a failure, not a value)."""

    values: dict[str, dict[int, float]] = field(default_factory=dict)
    failures: dict[str, list[str]] = field(default_factory=dict)

    def add(self, name: str, k: int, value: float) -> None:
        self.values.setdefault(name, {})[k] = value

    def fail(self, name: str, error: str) -> None:
        self.failures.setdefault(name, []).append(error)

    def get(self, name: str) -> list[float]:
        """The values of *name*, round by round."""
        got = self.values.get(name, {})
        return [got[k] for k in sorted(got)]

    def lists(self) -> dict[str, list[float]]:
        return {name: self.get(name) for name in self.values}

    def median(self, name: str) -> float | None:
        got = self.get(name)
        return statistics.median(got) if got else None

    def paired(self, a: str, b: str) -> list[float]:
        """a / b of each round both measured (b > 0)."""
        va, vb = self.values.get(a, {}), self.values.get(b, {})
        return [va[k] / vb[k] for k in sorted(va.keys() & vb.keys()) if vb[k] > 0]

    def as_json(self) -> dict[str, object]:
        rounds = sorted({k for v in self.values.values() for k in v})
        return {
            "rounds": len(rounds),
            "values": {n: [v.get(k) for k in rounds] for n, v in self.values.items()},
            "failures": self.failures,
        }


@dataclass(frozen=True)
class Spread:
    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread | None:
        if not values:
            return None
        return cls(statistics.median(values), min(values), max(values))

    def fmt(self, digits: int = 2) -> str:
        return f"{self.median:.{digits}f} [{self.low:.{digits}f}-{self.high:.{digits}f}]"


@dataclass(frozen=True)
class Noise:
    """How far a command's time moves against itself in the same rounds: the largest
    per-round A/A ratio away from 1, as a factor (0.04: within 4 % either way)."""

    margin: float
    rounds: int

    @classmethod
    def of(cls, ratios: Sequence[float]) -> Noise | None:
        good = [r for r in ratios if r > 0]
        if not good:
            return None
        return cls(math.exp(max(abs(math.log(r)) for r in good)) - 1, len(good))

    def covers(self, ratio: float) -> bool:
        """Whether *ratio* is within the noise (no difference shown)."""
        return ratio > 0 and abs(math.log(ratio)) <= math.log1p(self.margin) + 1e-12


@dataclass(frozen=True)
class Comparison:
    """a / b: the ratio of the medians, the per-round ratios, and the noise band."""

    a: str
    b: str
    ratio: float | None
    rounds: Spread | None
    noise: Noise | None

    @property
    def verdict(self) -> str:
        if self.ratio is None:
            return "no data"
        if self.noise is None:
            return "no A/A rounds"
        if self.noise.covers(self.ratio):
            return "within noise"
        return "lower" if self.ratio < 1 else "higher"

    def fmt(self) -> str:
        """e.g. "0.93 ±4 %" (the ratio with its noise band), "-" without data."""
        if self.ratio is None:
            return "-"
        if self.noise is None:
            return f"{self.ratio:.2f}"
        return f"{self.ratio:.2f} ±{100 * self.noise.margin:.0f} %"

    def as_json(self) -> dict[str, object]:
        return {
            "a": self.a,
            "b": self.b,
            "ratio": self.ratio,
            "rounds": None
            if self.rounds is None
            else [self.rounds.median, self.rounds.low, self.rounds.high],
            "noise": None if self.noise is None else self.noise.margin,
            "verdict": self.verdict,
        }


def compare(samples: Samples, a: str, b: str, noise_of: str | None = None) -> Comparison:
    """a / b from the medians, with the noise from the A/A rounds of *noise_of* (default:
    *b*, the baseline; or *a* when only it has a twin)."""
    ma, mb = samples.median(a), samples.median(b)
    ratio = ma / mb if ma is not None and mb else None
    twin = noise_of or next((x for x in (b, a) if aa(x) in samples.values), b)
    return Comparison(
        a, b, ratio, Spread.of(samples.paired(a, b)), Noise.of(samples.paired(twin, aa(twin)))
    )


#: one run of a measurement: its value, or its value and figures recorded beside it (named
#: "NAME what", e.g. "cp 1 XRootD copy phase") in the same round
Measure = Callable[[], float | tuple[float, dict[str, float]]]


def run_rounds(
    measures: Mapping[str, Measure],
    rounds: int,
    *,
    order: str = "alternate",
    seed: int = 0,
    twins: Iterable[str] = (),
    keep_going: bool = False,
    errors: tuple[type[BaseException], ...] = (RuntimeError, OSError),
    progress: Callable[[str], None] | None = None,
    samples: Samples | None = None,
) -> Samples:
    """Every measurement once per round, in *order*; the A/A twin of each of *twins* runs
    the same command once more in the same round.  With *keep_going* a measurement that
    raises one of *errors* is a failure of that run, and the round goes on."""
    got = samples if samples is not None else Samples()
    names = with_aa(list(measures), twins)
    for k in range(rounds):
        for name in round_order(names, k, order, seed):
            run = measures[name] if name in measures else measures[name.removesuffix(AA_SUFFIX)]
            try:
                value = run()
            except errors as exc:
                if not keep_going:
                    raise
                got.fail(name, str(exc))
                if progress:
                    progress(f"round {k + 1}/{rounds} {name}: FAILED {exc}")
                continue
            side: dict[str, float] = {}
            if isinstance(value, tuple):
                value, side = value
            got.add(name, k, value)
            if name == name.removesuffix(AA_SUFFIX):  # a twin's side figures are not kept
                for extra, v in side.items():
                    got.add(extra, k, v)
            if progress:
                progress(
                    f"round {k + 1}/{rounds} {name}: {value:.3f}"
                    + "".join(f", {n.removeprefix(name).strip()} {v:.3f}" for n, v in side.items())
                )
    return got


def spread_cells(values: Sequence[float], scale: float = 1.0, digits: int = 2) -> list[str]:
    """[median, min-max] of *values* x *scale*, as table cells."""
    s = Spread.of([v * scale for v in values])
    if s is None:
        return ["-", "-"]
    return [f"{s.median:.{digits}f}", f"{s.low:.{digits}f}-{s.high:.{digits}f}"]


def each(names: Iterable[str]) -> Iterator[str]:
    """*names* without A/A twins."""
    return (n for n in names if not n.endswith(AA_SUFFIX))
