"""What every case shares: the runner and its options (core), interleaved rounds, medians and
A/A noise (stats), the one table printer (table), the machine's load and commit (machine),
children and files (procs), the trees of an A/B case (trees)."""

from bench.lib.core import Bench, CannotRun, Case
from bench.lib.stats import Comparison, Samples, aa, compare, run_rounds

__all__ = ["Bench", "CannotRun", "Case", "Comparison", "Samples", "aa", "compare", "run_rounds"]
