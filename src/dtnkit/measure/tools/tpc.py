"""The third-party-copy tools: ``dtnkit-tpc`` (``dtnkit cp --tpc pull``) and ``gfal-tpc``
(``gfal-copy --copy-mode pull``), between a load's origins and its destination server on the
tool's side, as the study ran its parallel gfal-copy.  They measure loads only
(:class:`~dtnkit.measure.probes.load.LoadSpec`: a sweep point; their probe kind, ``tpc``, has
no probe of its own).

A load's ``streams`` is the number of concurrent transfers (each one TCP stream: ``dtnkit cp
--streams 1``, gfal-copy without ``-n``).  Transfer ``k`` copies ``origin[k % n]``'s file
``files[(k // n) % len(files)]`` to the destination as ``t{k}.bin``: a name of its own, never
written twice, and removed from the destination's data directory as soon as the transfer has
ended (so the destination's tmpfs holds at most ``streams`` files).  XRootD 5.5 keeps a
finished checksum job in its job table now and then (``XrdOucTable::Remove``) and answers the
next checksum query of the *same path* with HTTP 500 at once ("Program failed"); with one
name per slot, reused by the slot's next transfer, that failed one transfer in a third of
gfal-tpc points at 4-16 streams (docs/sweep.md; some 500s of unknown cause remain).
How many transfers: ``bytes`` set: ceil(bytes / file_size) (at least one per slot);
else each slot starts transfers until ``duration_s`` has passed (at least one each);
neither: one per slot.

The pull is what the study measured: the destination server is the active party (it fetches
from the origin through the lab path), the client only asks and waits.  ``verified`` is True
when a checksum (adler32) was compared end to end: gfal-copy ``-K adler32 --checksum-mode
both`` compares source and destination itself; ``dtnkit cp --tpc`` with a ``dtnkit serve``
destination has the active side compare it; with an XRootD destination (which does not)
the tool compares the source's ``Digest`` (a HEAD) with the destination's digest that
``dtnkit cp`` reports.

Times (``Transfer.start_s``/``end_s``) count from the start of :meth:`run` (its
``time.monotonic()`` is in ``ToolRun.extra["t0_monotonic"]`` for a runner that counts from
elsewhere).  Every process is started in the client's namespace in a session of its own and
stopped by PID (SIGTERM, then SIGKILL) at the load's deadline or when :meth:`run` is left in any
other way (Ctrl-C included).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import json
import math
import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from dtnkit.errors import BadInput
from dtnkit.host import process
from dtnkit.host.host import Host
from dtnkit.measure.probes.load import LoadSpec, Origin
from dtnkit.measure.procs import Batch
from dtnkit.measure.tool import MAX_RAW_BYTES, ToolContext, ToolRun, Transfer

KIND = "tpc"
CHECKSUM = "adler32"
#: the bearer token gfal-copy sends to servers that take none (XRootD without authorization)
NO_TOKEN = "dtnkit-sweep-no-token"
STOP_GRACE_S = 2.0


@dataclasses.dataclass(frozen=True)
class Job:
    """One transfer: its number, slot, source and destination URLs, and the destination
    file on this machine (None: the destination's directory is not known here)."""

    k: int
    slot: int
    origin: Origin
    src: str
    dst: str
    dst_file: Path | None = None


@dataclasses.dataclass(frozen=True)
class Pull:
    """One load of third-party copies: the spec, the host the copies are asked from, the
    load's private directory and its deadline."""

    spec: LoadSpec
    host: Host
    workdir: Path
    deadline: float

    @property
    def origins(self) -> tuple[Origin, ...]:
        return self.spec.origins

    @property
    def destination(self) -> Origin | None:
        return self.spec.destination


def pull(host: Host, spec: LoadSpec, context: ToolContext) -> Pull:
    """The load's :class:`Pull`; BadInput for a probe's spec, or without a directory."""
    if not isinstance(spec, LoadSpec):
        raise BadInput(
            "a third-party copy is measured in a sweep only",
            "it needs an origin and a destination server that the sweep starts",
            'give a sweep grid tool = ["dtnkit-tpc"] (or "gfal-tpc")',
        )
    if context.workdir is None:
        raise BadInput(
            "no directory for the copies' files",
            "a third-party copy keeps its headers and CA files in a directory of its own",
            "give the run a workdir",
        )
    deadline = (
        context.deadline if context.deadline is not None else time.monotonic() + spec.time_limit_s
    )
    return Pull(spec, host, context.workdir, deadline)


@dataclasses.dataclass
class TransferOutcome:
    ok: bool
    verified: bool
    output: str
    error: str = ""


def plan(env: Pull, scheme: str = "") -> Callable[[int, int], Job]:
    """Job ``k`` of slot ``slot`` (see the module's text); ``scheme`` replaces https."""
    if env.destination is None:
        raise ValueError("a third-party copy needs a destination server")
    dest = env.destination
    origins = env.origins

    def url(base: str) -> str:
        return scheme + base.split("://", 1)[1] if scheme else base

    def job(k: int, slot: int) -> Job:
        o = origins[k % len(origins)]
        name = o.files[(k // len(origins)) % len(o.files)]
        return Job(
            k,
            slot,
            o,
            f"{url(o.url_base)}/{name}",
            f"{url(dest.url_base)}/t{k}.bin",
            None if dest.root is None else dest.root / f"t{k}.bin",
        )

    if not origins or any(not o.files for o in origins):
        raise ValueError("every origin needs at least one source file")
    return job


def transfers_wanted(point: LoadSpec) -> int | None:
    """How many transfers a load asks for in all (None: until its duration has passed)."""
    if point.bytes:
        return max(point.streams, math.ceil(point.bytes / max(point.file_size, 1)))
    if point.duration_s:
        return None
    return point.streams


def run_transfers(
    env: Pull, job: Callable[[int, int], Job], one: Callable[[Job, Batch, float], TransferOutcome]
) -> ToolRun:
    """``point.streams`` slots running transfers concurrently (see the module's text)."""
    point = env.spec
    t0 = time.monotonic()
    wanted = transfers_wanted(point)
    until = t0 + (point.duration_s or 0.0)
    lock = threading.Lock()
    counter = [0]
    done: list[tuple[Job, Transfer]] = []
    raw: list[str] = []
    procs = Batch(STOP_GRACE_S)

    def next_k(first: bool) -> int | None:
        with lock:
            k = counter[0]
            if wanted is not None and k >= wanted:
                return None
            if wanted is None and not first and time.monotonic() >= until:
                return None
            counter[0] += 1
            return k

    def slot(s: int) -> None:
        first = True
        while time.monotonic() < env.deadline and not procs.closed:
            k = next_k(first)
            if k is None:
                return
            first = False
            j = job(k, s)
            start = time.monotonic()
            try:
                out = one(j, procs, env.deadline)
            except Exception as exc:  # one transfer's failure is recorded, the others go on
                out = TransferOutcome(False, False, "", f"{type(exc).__name__}: {exc}")
            end = time.monotonic()
            if j.dst_file is not None:  # after its end: not part of the transfer's time
                with contextlib.suppress(FileNotFoundError):
                    j.dst_file.unlink()
            t = Transfer(
                start_s=round(start - t0, 6),
                end_s=round(end - t0, 6) if out.ok else None,
                bytes=point.file_size if out.ok else 0,
                verified=out.verified,
                error="" if out.ok else (out.error or "failed")[-500:],
            )
            with lock:
                done.append((j, t))
                raw.append(f"--- transfer {k} slot {s}: {j.src} -> {j.dst}\n{out.output}")

    pool = concurrent.futures.ThreadPoolExecutor(point.streams)
    try:
        futures = [pool.submit(slot, s) for s in range(point.streams)]
        for f in futures:
            f.result()
    finally:
        procs.close()  # first (Ctrl-C too): the slots' processes, then the slots return
        pool.shutdown(wait=True)
    done.sort(key=lambda d: d[0].k)
    transfers = tuple(t for _j, t in done)
    failed = [t for t in transfers if t.end_s is None]
    text = "\n".join(raw)
    encoded = text.encode()
    if len(encoded) > MAX_RAW_BYTES:
        text = encoded[-MAX_RAW_BYTES:].decode(errors="replace")
    why = ""
    if not transfers:
        why = "no transfer ran before the point's deadline"
    elif failed:
        why = f"{len(failed)} of {len(transfers)} transfers failed: {failed[0].error}"
    return ToolRun(
        {"t0_monotonic": t0, "checksum": CHECKSUM, "transfers_per_origin": _per_origin(done)},
        text,
        transfers=transfers,
        failed=why,
    )


def _per_origin(done: Sequence[tuple[Job, Transfer]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for j, t in done:
        if t.end_s is not None:
            out[str(j.origin.index)] = out.get(str(j.origin.index), 0) + 1
    return out


def _left(deadline: float) -> float:
    return max(deadline - time.monotonic(), 1.0)


# --------------------------------------------------------------------------- dtnkit cp --tpc


DIGEST = re.compile(r"^digest:\s*(.*)$", re.I | re.M)


def header_file(workdir: Path, origin: Origin) -> Path:
    """A file (mode 0600, in the point's private directory) holding the origin's
    Authorization header, for ``curl -H @FILE``."""
    path = workdir / f"auth-o{origin.index}.hdr"
    if not path.is_symlink() and path.is_file():
        return path
    # written whole under a name of this thread's, then renamed: concurrent transfers of
    # the point never read a half-written file
    tmp = workdir / f".auth-o{origin.index}-{threading.get_ident()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(f"Authorization: Bearer {origin.token}\n")
    os.replace(tmp, path)
    return path


def source_digest(env: Pull, j: Job, procs: Batch, deadline: float) -> str | None:
    """The source's adler32 as lowercase hex (a HEAD with Want-Digest from the client)."""
    argv = [
        "curl",
        "-sS",
        "-f",
        "-I",
        "--max-time",
        f"{_left(deadline):.0f}",
        "-H",
        f"Want-Digest: {CHECKSUM}",
    ]
    if j.origin.ca_file is not None:
        argv += ["--cacert", str(j.origin.ca_file)]
    if j.origin.token:  # from a file (curl -H @FILE): a token on a command line shows in ps
        argv += ["-H", f"@{header_file(env.workdir, j.origin)}"]
    status, out = procs.run(env.host.argv([*argv, j.src]), deadline)
    m = DIGEST.search(out)
    if status != 0 or not m:
        return None
    for item in m.group(1).split(","):
        name, _, value = item.strip().partition("=")
        if name.lower() == CHECKSUM:
            return value.strip().lower()
    return None


class DtnkitTpc:
    """``dtnkit cp --tpc pull`` from an origin to the destination server, one process per
    transfer in the client's namespace."""

    name = "dtnkit-tpc"
    kind = KIND
    about = "dtnkit cp --tpc pull: the destination server fetches from the origin"
    package = "dtnkit"

    def can_run(self) -> tuple[bool, list[str]]:
        return True, []  # this Python runs dtnkit

    def parse(self, text: str) -> dict[str, Any]:
        """``dtnkit cp --format json``'s last summary line."""
        lines = [line for line in text.strip().splitlines() if line.startswith("{")]
        try:
            doc = json.loads(lines[-1]) if lines else {}
        except ValueError:
            return {}
        return doc if isinstance(doc, dict) else {}

    def one(self, env: Pull, j: Job, procs: Batch, deadline: float) -> TransferOutcome:
        dest = env.destination
        assert dest is not None
        argv = [
            sys.executable,
            "-m",
            "dtnkit",
            "cp",
            "--tpc",
            "pull",
            "--streams",
            "1",
            "-K",
            CHECKSUM,
            "-f",
            "--format",
            "json",
            "--deadline",
            f"{_left(deadline):.0f}s",
        ]
        if dest.ca_file is not None:
            argv += ["--ca-file", str(dest.ca_file)]
        # the tokens through the environment, never argv (ps, the stored raw output)
        penv = {
            k: v
            for k, v in os.environ.items()
            if k not in ("DTNKIT_TOKEN", "BEARER_TOKEN", "DTNKIT_REMOTE_TOKEN")
        }
        if dest.token:
            penv["DTNKIT_TOKEN"] = dest.token
        if j.origin.token:
            penv["DTNKIT_REMOTE_TOKEN"] = j.origin.token
        status, out = procs.run(env.host.argv([*argv, j.src, j.dst]), deadline, penv)
        if status != 0:
            return TransferOutcome(False, False, out, _last_line(out) or f"exit {status}")
        try:
            summary = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return TransferOutcome(False, False, out, "no JSON summary from dtnkit cp")
        if summary.get("bytes") != env.spec.file_size:
            return TransferOutcome(
                False,
                False,
                out,
                f"destination has {summary.get('bytes')} bytes, not {env.spec.file_size}",
            )
        if dest.kind == "dtnkit":  # the active side compared the source's digest
            return TransferOutcome(True, True, out)
        theirs = source_digest(env, j, procs, deadline)
        ours = str(summary.get("digest") or "").lower()
        if theirs is None or not ours:
            return TransferOutcome(True, False, out)  # copied, not verified
        if theirs != ours:
            return TransferOutcome(
                False, False, out, f"{CHECKSUM} mismatch: source {theirs}, destination {ours}"
            )
        return TransferOutcome(True, True, out)

    def run(self, host: Host, spec: LoadSpec, context: ToolContext) -> ToolRun:
        env = pull(host, spec, context)
        job = plan(env)
        return run_transfers(env, job, lambda j, procs, dl: self.one(env, j, procs, dl))


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][-500:] if lines else ""


#: gfal-copy's line when a server answered its checksum query (a HEAD with Want-Digest)
#: with HTTP 500
CHECKSUM_500 = re.compile(r"\b(SOURCE|DESTINATION) CHECKSUM HTTP 500\b")
#: why XRootD 5.5 gives that 500: the two causes seen in sweeps (docs/sweep.md, "Why, and
#: what was fixed")
XROOTD_CHECKSUM_500 = (
    "XRootD 5.5 answers 500 to a checksum query told twice to wait 30 s for a checksum job "
    "(over 3 x xrootd.chksum max at once; xrootd/xrootd#2480), or at once to one that meets "
    'the job of an earlier query of the same path it failed to remove ("Program failed"); '
    "docs/sweep.md"
)


def gfal_error(out: str, *, source: str, destination: str) -> str:
    """A failed gfal-copy's error: its last line, and when an XRootD server (``source`` and
    ``destination`` are the two sides' server kinds) answered the checksum query with HTTP
    500, the cause."""
    line = _last_line(out)
    m = CHECKSUM_500.search(line)
    kind = None if m is None else source if m.group(1) == "SOURCE" else destination
    if kind != "xrootd":
        return line
    return f"{line.rstrip()[: 500 - len(XROOTD_CHECKSUM_500) - 3]} ({XROOTD_CHECKSUM_500})"


# --------------------------------------------------------------------------- gfal-copy


#: the script a candidate Python runs to show it can import gfal2
GFAL2_IMPORTABLE = Path(__file__).with_name("gfal2_importable.py")


def gfal_python() -> str | None:
    """A python that can ``import gfal2`` (the gfal-copy script needs one)."""
    for candidate in (os.environ.get("GFAL_PYTHONBIN"), "/usr/bin/python3", "python3"):
        exe = shutil.which(candidate) if candidate else None
        if (
            exe
            and process.run([exe, str(GFAL2_IMPORTABLE)], text=False, timeout=60).returncode == 0
        ):
            return exe
    return None


def ca_dir(ca_file: Path, workdir: Path) -> Path:
    """A hashed CA directory (X509_CERT_DIR) holding ``ca_file``, made in ``workdir``."""
    d = workdir / "x509-ca"
    if not d.is_dir():
        d.mkdir(parents=True)
        shutil.copy(ca_file, d / "ca.pem")
        process.run(["openssl", "rehash", str(d)], text=False, check=True, timeout=60)
    return d


class GfalTpc:
    """``gfal-copy --copy-mode pull -K adler32 --checksum-mode both`` between an origin and
    the destination (davs:// URLs), one process per transfer in the client's namespace."""

    name = "gfal-tpc"
    kind = KIND
    about = "gfal-copy --copy-mode pull with adler32 compared on both ends"
    package = "gfal2-util (gfal-copy) and python3-gfal2"

    def can_run(self) -> tuple[bool, list[str]]:
        if shutil.which("gfal-copy") is None:
            return False, ["gfal-copy is not installed (apt-get install gfal2-util python3-gfal2)"]
        return True, []

    def parse(self, text: str) -> dict[str, Any]:
        """Nothing: gfal-copy's output has no figures; a failure's line is its error."""
        return {}

    def environment(self, env: Pull) -> dict[str, str]:
        out = {k: v for k, v in os.environ.items() if not k.startswith(("X509_", "BEARER_"))}
        dest = env.destination
        assert dest is not None
        if dest.ca_file is not None:
            out["X509_CERT_DIR"] = str(ca_dir(dest.ca_file, env.workdir))
        out["GFAL_PYTHONBIN"] = gfal_python() or "python3"
        # Without a bearer token gfal2 asks the active party to take a delegated proxy
        # (COPY with "Credential: gridsite"), which XRootD 5.5's TPC refuses ("unsupported
        # credential type"); with one it sends "Credential: none".  XRootD here has no
        # authorization, so any token does for it.
        out["BEARER_TOKEN"] = (
            dest.token or next((o.token for o in env.origins if o.token), "") or NO_TOKEN
        )
        return out

    def one(
        self, env: Pull, j: Job, procs: Batch, deadline: float, penv: dict[str, str]
    ) -> TransferOutcome:
        left = f"{_left(deadline):.0f}"
        argv = [
            "gfal-copy",
            "-f",
            "--copy-mode",
            "pull",
            "-K",
            CHECKSUM,
            "--checksum-mode",
            "both",
            "-t",
            left,
            "-T",
            left,
            j.src,
            j.dst,
        ]
        status, out = procs.run(env.host.argv(argv), deadline, env=penv)
        if status != 0:
            dest = env.destination
            assert dest is not None
            error = gfal_error(out, source=j.origin.kind, destination=dest.kind)
            return TransferOutcome(False, False, out, error or f"exit {status}")
        return TransferOutcome(True, True, out)

    def run(self, host: Host, spec: LoadSpec, context: ToolContext) -> ToolRun:
        env = pull(host, spec, context)
        job = plan(env, scheme="davs://")
        penv = self.environment(env)
        return run_transfers(env, job, lambda j, procs, dl: self.one(env, j, procs, dl, penv))
