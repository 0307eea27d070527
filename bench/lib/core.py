"""``python -m bench [CASE] [options]``: the list of cases, the options every case shares
(declared once, here), the header and load lines, and the JSON result.

A case is a module ``bench/cases/NAME.py`` (``NAME`` with "-" for "_" on the command line)
whose docstring's first line is its question and which holds ``CASE = Case(run=...)``."""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.lib import stats
from bench.lib.machine import CpuWatch, loadavg, machine
from bench.lib.procs import Tracked, log
from bench.lib.table import STYLES, WIDTH, render
from bench.lib.trees import BaseError, Tree, base_tree, this_tree

CASES_DIR = Path(__file__).resolve().parents[1] / "cases"
SCHEMA = "dtnkit.bench/1"
PREFIX = re.compile(r"^[a-z][a-z0-9]{0,7}$")
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class CannotRun(Exception):
    """The case cannot run here (not root, a tool missing): exit 2 with the reasons."""


def _no_options(parser: argparse.ArgumentParser) -> None:
    return None


def _no_check(args: argparse.Namespace) -> str | None:
    return None


@dataclass(frozen=True)
class Case:
    """What a case file declares; everything else comes from bench/lib."""

    run: Callable[[Bench], int | None]
    #: the case's own options (the shared ones are added by the runner)
    options: Callable[[argparse.ArgumentParser], None] = _no_options
    #: the default of --rounds
    rounds: int = 3
    #: --base REF: "none" (not offered), "optional" or "required" (an A/B case)
    base: str = "none"
    needs_root: bool = False
    tools: tuple[str, ...] = ()
    #: --quick: shrink the case's own options to their smallest form (rounds are set to 1)
    quick: Callable[[argparse.Namespace], None] | None = None
    #: a check across options: None, or the error message
    check: Callable[[argparse.Namespace], str | None] = _no_check
    #: what --quick does, for --help
    quick_help: str = "one round"


def case_names() -> list[str]:
    return sorted(
        p.stem.replace("_", "-") for p in CASES_DIR.glob("*.py") if not p.name.startswith("_")
    )


def question(name: str) -> str:
    """The first line of a case's docstring, read without importing it."""
    path = CASES_DIR / f"{name.replace('-', '_')}.py"
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return doc.split("\n", 1)[0].strip()


def load_case(name: str) -> tuple[Case, str]:
    module = importlib.import_module(f"bench.cases.{name.replace('-', '_')}")
    case = getattr(module, "CASE", None)
    if not isinstance(case, Case):
        raise TypeError(f"bench/cases/{name}.py has no CASE = Case(...)")
    return case, module.__doc__ or ""


def prefix_type(value: str) -> str:
    if not PREFIX.match(value):
        raise argparse.ArgumentTypeError(
            f"{value!r}: 1-8 lower-case letters and digits, starting with a letter"
        )
    return value


def positive(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"{value!r}: at least 1")
    return n


def json_path(value: str) -> Path:
    path = Path(value)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{value}: a directory, give a file name")
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"{value}: no directory {path.parent}")
    return path


def parser_for(name: str, case: Case, doc: str) -> argparse.ArgumentParser:
    """The case's parser: the shared options, then its own."""
    ap = argparse.ArgumentParser(
        prog=f"python -m bench {name}",
        description=doc.strip(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    common = ap.add_argument_group("options every case takes")
    common.add_argument(
        "--rounds",
        "--repeat",
        dest="rounds",
        type=positive,
        default=case.rounds,
        metavar="N",
        help=f"rounds of the interleaved measurements (default {case.rounds})",
    )
    common.add_argument(
        "--quick",
        action="store_true",
        help=f"the smallest form, to see that it works: {case.quick_help}",
    )
    common.add_argument(
        "--prefix",
        type=prefix_type,
        default="bench",
        help="start of the names of what it creates (lab paths, namespaces, "
        "temporary directories); default bench",
    )
    common.add_argument(
        "--json",
        type=json_path,
        metavar="FILE",
        help="also write the result (tables, samples, commit, load) as JSON",
    )
    common.add_argument(
        "--order",
        choices=stats.ORDERS,
        default="alternate",
        help="order within a round: as listed and reversed every other round (default), or random",
    )
    common.add_argument("--seed", type=int, default=0, help="seed of --order random")
    common.add_argument(
        "--table",
        choices=STYLES,
        default="text" if sys.stdout.isatty() else "md",
        help="table style: Markdown (default when not a terminal) or text in 80 columns",
    )
    if case.base != "none":
        common.add_argument(
            "--base",
            metavar="REF",
            required=case.base == "required",
            help="the baseline: a git ref of this repository, checked out "
            "with git worktree into a temporary directory",
        )
    # an argument group takes add_argument as the parser does (--help lists them apart)
    case.options(ap.add_argument_group(f"options of {name}"))  # type: ignore[arg-type]
    return ap


def parse(name: str, case: Case, doc: str, argv: list[str]) -> argparse.Namespace:
    ap = parser_for(name, case, doc)
    args = ap.parse_args(argv)
    if not hasattr(args, "base"):
        args.base = None
    if args.quick:
        args.rounds = 1
        if case.quick is not None:
            case.quick(args)
    problem = case.check(args)
    if problem:
        ap.error(problem)
    return args


@dataclass
class Result:
    """The JSON document of a run (``--json FILE``)."""

    doc: dict[str, Any] = field(default_factory=dict)

    def add(self, key: str, item: object) -> None:
        self.doc.setdefault(key, []).append(item)

    def write(self, path: Path) -> None:
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(self.doc, indent=1) + "\n")
        os.replace(tmp, path)


class Bench:
    """What a case runs with: its options, the trees, the output, cleanup and children."""

    def __init__(
        self, name: str, args: argparse.Namespace, stack: contextlib.ExitStack, result: Result
    ) -> None:
        self.name = name
        self.args = args
        self.stack = stack
        self.result = result
        self.tracked = Tracked()
        stack.callback(self.tracked.stop_all)
        self.this: Tree = this_tree()
        self.base: Tree | None = None

    # ------------------------------------------------------------------ options
    @property
    def rounds(self) -> int:
        return int(self.args.rounds)

    @property
    def quick(self) -> bool:
        return bool(self.args.quick)

    @property
    def prefix(self) -> str:
        return str(self.args.prefix)

    # ------------------------------------------------------------------ output
    def log(self, msg: str) -> None:
        log(msg)

    def out(self, line: str = "") -> None:
        print(line, flush=True)

    def para(self, text: str) -> None:
        """A paragraph: as is in Markdown, wrapped to 80 columns in text."""
        self.out(
            text if self.args.table == "md" else textwrap.fill(text, WIDTH, break_on_hyphens=False)
        )
        self.out()

    def note(self, text: str) -> None:
        """A paragraph under the tables (and in the JSON result)."""
        self.para(text)
        self.result.add("notes", text)

    def heading(self, title: str) -> None:
        self.para(f"### {title}" if self.args.table == "md" else title)

    def table(self, head: list[str], rows: list[list[str]], title: str | None = None) -> None:
        if title:
            self.heading(title)
        self.out(render(head, rows, self.args.table))
        self.out()
        self.result.add("tables", {"title": title, "head": head, "rows": rows})

    def watch(self) -> CpuWatch:
        """A CPU watch that counts this bench's running children as its own."""
        return CpuWatch(self.tracked.pids)

    def load_line(self, watch: CpuWatch, what: str = "This section") -> None:
        load = watch.load()
        self.note(load.line(what))
        self.result.add("sections", {"what": what, "load": load.as_json()})

    # ------------------------------------------------------------------ measuring
    def rounds_of(
        self,
        measures: Mapping[str, stats.Measure],
        *,
        twins: Iterable[str] = (),
        label: str = "",
        rounds: int | None = None,
        keep_going: bool = False,
        errors: tuple[type[BaseException], ...] = (RuntimeError, OSError),
        samples: stats.Samples | None = None,
    ) -> stats.Samples:
        """*measures* interleaved for --rounds (or *rounds*) rounds, A/A twins of *twins*
        included; the samples go into the JSON result under *label*."""
        got = stats.run_rounds(
            measures,
            rounds or self.rounds,
            order=self.args.order,
            seed=self.args.seed,
            twins=twins,
            keep_going=keep_going,
            errors=errors,
            progress=self.log,
            samples=samples,
        )
        self.result.add("samples", {"label": label, **got.as_json()})
        return got

    def compare(
        self, samples: stats.Samples, a: str, b: str, noise_of: str | None = None
    ) -> stats.Comparison:
        """a / b with its noise band (from *noise_of*'s A/A rounds; default b's or a's)."""
        c = stats.compare(samples, a, b, noise_of)
        self.result.add("comparisons", c.as_json())
        return c

    # ------------------------------------------------------------------ files, children
    def workdir(self, what: str = "", where: str = "/dev/shm", mode: int = 0o700) -> Path:
        """A temporary directory named for the prefix and case, removed at the end."""
        tag = f"{self.prefix}-{self.name}{f'-{what}' if what else ''}-"
        path = Path(tempfile.mkdtemp(prefix=f"dtnkit-bench-{tag}", dir=where))
        path.chmod(mode)
        self.stack.callback(shutil.rmtree, path, True)
        return path


def header(name: str, argv: list[str], bench: Bench) -> str:
    base = f"; {bench.base.describe()}" if bench.base else ""
    m = machine()
    return (
        f"`python -m bench {' '.join([name, *argv])}`: {time.strftime('%Y-%m-%d %H:%M')}, "
        f"commit {bench.this.commit.short()}{base}; {m['cpus']} CPUs, Python {m['python']}, "
        f"kernel {m['kernel']}; 1-min load average at the start {loadavg():.2f}"
    )


def preflight(case: Case) -> list[str]:
    reasons = []
    if case.needs_root and os.geteuid() != 0:
        reasons.append("needs root (lab paths, namespaces)")
    gone = [t for t in case.tools if shutil.which(t) is None]
    if gone:
        reasons.append(f"missing {', '.join(gone)}")
    return reasons


def list_cases() -> int:
    names = case_names()
    width = max(len(n) for n in names)
    print("usage: python -m bench CASE [options]   (python -m bench CASE --help)\n")
    for n in names:
        print(
            textwrap.fill(
                question(n),
                WIDTH,
                initial_indent=f"  {n:<{width}}  ",
                subsequent_indent=" " * (width + 4),
            )
        )
    return EXIT_OK


def _terminate(signum: int, frame: object) -> None:
    sys.exit(128 + signum)  # run the finally blocks: servers, tuning, lab paths, files


@contextlib.contextmanager
def signals() -> Iterator[None]:
    old = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGHUP, _terminate)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started with "&"
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "list"):
        return list_cases()
    name, rest = argv[0], argv[1:]
    if name not in case_names():
        print(
            f"python -m bench: error: no case {name!r}; `python -m bench` lists them",
            file=sys.stderr,
        )
        return EXIT_USAGE
    case, doc = load_case(name)
    args = parse(name, case, doc, rest)
    reasons = preflight(case)
    if reasons:
        print(f"python -m bench {name}: cannot run here: {'; '.join(reasons)}", file=sys.stderr)
        return EXIT_USAGE
    result = Result(
        {
            "schema": SCHEMA,
            "case": name,
            "question": question(name),
            "argv": [name, *rest],
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "machine": machine(),
        }
    )
    code = EXIT_FAILED
    with signals():
        try:
            with contextlib.ExitStack() as stack:
                bench = Bench(name, args, stack, result)
                if args.base:
                    bench.base = stack.enter_context(base_tree(args.base, bench.prefix))
                    bench.base.check_import()
                result.doc["loadavg_start"] = loadavg()
                result.doc["commit"] = {
                    "sha": bench.this.commit.sha,
                    "dirty": bench.this.commit.dirty,
                }
                result.doc["base"] = (
                    None
                    if bench.base is None
                    else {"ref": bench.base.ref, "sha": bench.base.commit.sha}
                )
                bench.para(header(name, rest, bench))
                watch = bench.watch()
                code = case.run(bench) or EXIT_OK
                load = watch.load()
                bench.para(load.line("The run"))
                result.doc["load"] = load.as_json()
        except BaseError as exc:
            print(f"python -m bench {name}: error: {exc}", file=sys.stderr)
            code = EXIT_USAGE
        except RuntimeError as exc:  # a measurement that cannot go on: what and why
            print(f"python -m bench {name}: error: {exc}", file=sys.stderr)
            code = EXIT_FAILED
        except CannotRun as exc:
            print(f"python -m bench {name}: cannot run here: {exc}", file=sys.stderr)
            code = EXIT_USAGE
        except KeyboardInterrupt:
            log(f"{name}: interrupted; cleaned up")
            code = EXIT_INTERRUPTED
        except SystemExit as exc:
            log(f"{name}: stopped ({exc.code}); cleaned up")
            code = exc.code if isinstance(exc.code, int) else EXIT_FAILED
        finally:
            result.doc["exit"] = code
            if args.json is not None:
                result.write(args.json)
    if code != EXIT_USAGE:  # a refusal's one line stays the last one
        log(f"{name}: done, exit {code}")
    return code
