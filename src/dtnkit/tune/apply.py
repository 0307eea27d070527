"""Apply and restore as transactions: baseline first, journal every write, undo on failure.

``apply`` saves a baseline snapshot of every restorable setting before its first write (not
opt-in), writes in a fixed group order, re-reads each value to verify it, and on the first
failure replays the journal backwards so the host ends exactly as it began.  ``restore``
uses the same executor.

One lock per target network namespace covers the whole transaction: read (the audit), plan,
baseline snapshot, write and verify, so the baseline is what the host held when the lock was
taken, never a read made before it.  See :func:`lock` for its scope.
"""

from __future__ import annotations

import fcntl
import fnmatch
import os
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dtnkit.errors import BadInput, DtnkitError, ExitStatus, Locked, NeedsRoot
from dtnkit.host import facts
from dtnkit.host.facts import Unavailable
from dtnkit.host.host import Host
from dtnkit.host.signals import interrupting
from dtnkit.tune import persist
from dtnkit.tune.audit import Audit, Finding, build_context, tunables_for
from dtnkit.tune.context import Context
from dtnkit.tune.keys import group_of, typed
from dtnkit.tune.kinds.base import Scope, Tunable
from dtnkit.tune.profile import GROUPS, KNOWN_KEYS, load_profile
from dtnkit.tune.registry import prepare_scopes, tunable_for_key
from dtnkit.tune.snapshot import (
    Snapshot,
    Store,
    capture,
    new_snapshot,
    scope_here,
    scope_of,
    sort_keys,
    state_dir_error,
)
from dtnkit.tune.status import AuditStatus

ON_REQUEST = {"mtu": "link/", "tuned": "tuned/"}

#: where the per-namespace locks live (tmpfs: a lock never outlives a boot)
LOCK_DIR = Path("/run/dtnkit/tune")


@dataclass
class Step:
    tunable: Tunable
    before: Any
    after: Any
    group: str = ""
    unsafe: str = ""  # why ``after`` weakens security or breaks connectivity ("": it does not)
    # what writing ``after`` makes the kernel remove for good (IPv6 state of an interface
    # whose MTU goes below 1280), read just before the write: undo puts it back
    dropped: list[tuple[Tunable, Any]] = field(default_factory=list)

    def describe(self) -> str:
        t = self.tunable
        where = f" on {t.device}" if t.device else ""
        return f"{t.label}{where}: {t.show(self.before)} -> {t.show(self.after)}"

    def as_dict(self) -> dict[str, Any]:
        doc = {
            "key": self.tunable.key,
            "group": self.group,
            "before": typed(self.before),
            "after": typed(self.after),
        }
        if self.unsafe:
            doc["unsafe"] = self.unsafe
        return doc


def allowed(key: str, allow_unsafe: Sequence[str]) -> bool:
    """Whether ``--allow-unsafe`` names ``key``: the key itself, or a profile key with ``*``
    for its device (``link/*/mtu``)."""
    return any(
        key == a or ("*" in a and fnmatch.fnmatchcase(key, a.replace("*", "[!/]*")))
        for a in allow_unsafe
    )


def refuse_unsafe(steps: Sequence[Step], allow_unsafe: Sequence[str], what: str) -> None:
    """BadInput (exit 9) naming every unsafe step ``--allow-unsafe`` does not name, before
    anything is written."""
    refused = [s for s in steps if s.unsafe and not allowed(s.tunable.key, allow_unsafe)]
    if not refused:
        return
    first = refused[0]
    others = f" (and {', '.join(s.tunable.key for s in refused[1:])})" if refused[1:] else ""
    raise BadInput(
        f"{what} would set {first.tunable.key} = {first.tunable.show(first.after)}{others}, "
        "which is unsafe",
        first.unsafe,
        "remove it from the profile (or snapshot), or give "
        + " ".join(f"--allow-unsafe {s.tunable.key}" for s in refused)
        + " to write it anyway",
    )


@dataclass
class Outcome:
    """What a transaction did.  ``failed`` is None on success."""

    done: list[Step] = field(default_factory=list)
    failed: Step | None = None
    error: DtnkitError | None = None
    rollback_errors: list[str] = field(default_factory=list)
    baseline: str | None = None
    persisted: list[str] = field(default_factory=list)
    audit: Audit | None = field(default=None, repr=False)  # apply: the audit made under the lock
    planned: list[Step] = field(default_factory=list)
    held: Held | None = None
    skipped: list[str] = field(default_factory=list)  # left alone on purpose, with why
    # apply after one that did not finish: the snapshot this run took of the half-tuned host
    # (``baseline`` stays the one taken before the unfinished apply's first write)
    half_tuned: str | None = None
    # restore: what the snapshot holds that could not be put back (a device gone or renamed)
    not_restored: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.failed is None and self.error is None

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "baseline": self.baseline,
            "applied": [s.as_dict() for s in self.done] if self.ok else [],
            "failed": self.failed.as_dict() if self.failed else None,
            "error": self.error.as_dict() if self.error else None,
            "rolled_back": [s.as_dict() for s in self.done] if not self.ok else [],
            "rollback_errors": self.rollback_errors,
            "persisted": self.persisted,
            "lock": self.held.as_dict() if self.held else None,
            "skipped": self.skipped,
            "not_restored": self.not_restored,
            "half_tuned_snapshot": self.half_tuned,
        }


def plan(audit: Audit, on_request: Sequence[str] = ()) -> list[Step]:
    """Steps for every differing item apply may change, in the fixed group order."""
    wanted = {ON_REQUEST[name] for name in on_request}
    steps: list[Step] = []
    for f in audit.findings:
        if f.status != AuditStatus.DIFFERS or f.tunable is None or f.apply == "audit-only":
            continue
        if f.apply == "on-request" and not any(f.key.startswith(p) for p in wanted):
            continue
        steps.append(Step(f.tunable, f.current, f.target, f.group, f.unsafe))
    return steps


def undecided(audit: Audit) -> list[dict[str, Any]]:
    """The items apply cannot decide (the audit's ``unknown``), each with why and the option
    that would decide it (``give``, e.g. ``--speed``; null when none can): the plan lists
    them, so a plan is never mistaken for all there is to do."""
    return [
        {
            "key": f.key,
            "group": f.group,
            "label": f.label,
            "device": f.device,
            "why": f.why,
            "give": f.give or None,
        }
        for f in audit.findings
        if f.status == AuditStatus.UNKNOWN
    ]


def skipped_on_request(audit: Audit, on_request: Sequence[str]) -> list[Finding]:
    wanted = {ON_REQUEST[name] for name in on_request}
    return [
        f
        for f in audit.findings
        if f.status == AuditStatus.DIFFERS
        and f.apply == "on-request"
        and not any(f.key.startswith(p) for p in wanted)
    ]


def persist_values(audit: Audit, steps: Sequence[Step]) -> dict[str, Any]:
    """What --persist makes survive a reboot: everything the profile wants that is in force."""
    values: dict[str, Any] = {}
    applied = {s.tunable.key: s.after for s in steps}
    for f in audit.findings:
        if f.tunable is None or f.status not in (AuditStatus.OK, AuditStatus.DIFFERS):
            continue
        if f.status == AuditStatus.DIFFERS and f.key not in applied:
            continue
        if f.key not in applied and f.apply != "auto":
            continue  # on-request items persist only when this run applied them
        # what is in force now: the value written, else the current one (raise-only keeps a
        # site's larger value); a qdisc that already paces is persisted as its recommendation
        values[f.key] = applied.get(
            f.key, f.recommended if f.tunable.persist_recommended else f.current
        )
    return values


def persist_origin(audit: Audit) -> str:
    return f"profile {audit.profile.name}, rtt {audit.ctx.rtt_ms:g} ms"


def restorable_tunables(ctx: Context, groups: Sequence[str] = GROUPS) -> list[Tunable]:
    """Every setting a baseline must hold for the selected devices."""
    keys = [k for k, g in KNOWN_KEYS.items() if g in groups]
    keys += [k for k, s in ctx.profile.items.items() if s.group in groups and k not in keys]
    return [
        t
        for key in keys
        if not key.startswith("check/")
        for t in tunables_for(key, ctx.devices, ctx.ifaces)
    ]


def live_values(host: Host, also: Sequence[str] = ()) -> dict[str, Any]:
    """Every restorable setting of the host as it is now (what `tune save` stores), and the
    keys ``also`` names that only a snapshot holds (to compare with one that has them)."""
    ctx = build_context(host, load_profile("dtn", ()))
    values = capture(host, ctx, restorable_tunables(ctx))
    for key in also:
        tunable = tunable_for_key(key)
        value = tunable.read(host) if tunable.snapshot_only else None
        if value is not None and not isinstance(value, Unavailable):
            values[key] = value
    return values


def require_root(host: Host, what: str) -> None:
    if host.is_live and os.geteuid() != 0:
        raise NeedsRoot(
            f"{what} needs root",
            "it writes /proc/sys and runs ip, tc and ethtool",
            "run it with sudo, or use --dry-run to see the plan",
        )


def sigterm_as_interrupt() -> AbstractContextManager[bool]:
    """Let SIGTERM (systemd, timeout, Ansible) unwind like Ctrl-C, so the journal is undone."""
    return interrupting(signal.SIGTERM)


@dataclass
class Held:
    """The lock a transaction ran under: which file, how long it waited, when it held it
    (wall-clock seconds, comparable between processes)."""

    path: Path
    target: str
    waited_s: float
    acquired: float
    released: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "target": self.target,
            "waited_s": self.waited_s,
            "acquired": self.acquired,
            "released": self.released,
        }


def lock_path(host: Host, state_dir: Path) -> tuple[Path, str]:
    """The lock file for ``host`` and what it guards.

    A live host's lock is keyed by the identity (inode) of its network namespace, under
    /run/dtnkit/tune: every apply and restore on one namespace takes the same lock whatever its
    --state-dir, and two names for one namespace (or ``ip netns exec NS dtnkit ...`` against
    ``--netns NS``) share it.  Runs on different namespaces do not wait for each other: inside a
    namespace only that namespace's settings are written.  A captured tree (--tree) is locked
    by a file in its state dir, as it has no namespace.
    """
    if not host.is_live:
        return state_dir / "tune.lock", f"tree {host.root}"
    ns_file = f"/run/netns/{host.netns}" if host.netns else "/proc/self/ns/net"
    try:
        st = os.stat(ns_file)
    except OSError as exc:
        raise BadInput(
            f"cannot lock namespace {host.netns or 'of this process'}",
            f"{ns_file}: {exc.strerror or exc}",
            "see `ip netns list`",
        ) from exc
    return LOCK_DIR / f"netns-{st.st_dev}-{st.st_ino}.lock", host.label


@contextmanager
def lock(
    host: Host,
    state_dir: Path,
    *,
    wait_s: float = 0.0,
    on_wait: Callable[[str], None] | None = None,
) -> Iterator[Held]:
    """Hold the target's lock for a whole transaction (see :func:`lock_path` for its scope).

    With ``wait_s`` 0 a held lock fails at once with exit 8 (LOCKED); otherwise it waits up to
    ``wait_s`` seconds, telling ``on_wait`` once who holds it, then fails with exit 8.
    """
    path, target = lock_path(host, state_dir)
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fh = open(path, "a+")  # noqa: SIM115 - held for the whole transaction
    except OSError as exc:
        if path.is_relative_to(state_dir):  # a --tree run locks in the state dir
            raise state_dir_error(state_dir, "cannot take the lock", exc) from exc
        raise DtnkitError(
            f"cannot open the lock {path}",
            exc.strerror or str(exc),
            "check that the directory is writable (run as root)",
        ) from exc
    start = time.monotonic()
    told = False
    try:
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError as exc:
                fh.seek(0)
                holder = fh.read().strip() or "unknown"
                waited = time.monotonic() - start
                if waited >= wait_s:
                    after = f" after waiting {waited:.0f} s" if wait_s else ""
                    raise Locked(
                        f"another dtnkit apply or restore is running on {target}",
                        f"{path} is held by PID {holder}{after}",
                        "wait for it to finish and run again, or give --wait 60s",
                    ) from exc
                if not told and on_wait is not None:
                    on_wait(
                        f"waiting up to {wait_s:g} s for PID {holder}, which holds the "
                        f"lock on {target}"
                    )
                    told = True
                time.sleep(min(0.05, max(0.0, wait_s - waited)))
        held = Held(path, target, round(time.monotonic() - start, 3), time.time())
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        yield held
        held.released = time.time()
    finally:
        fh.close()


@contextmanager
def store_lock(state_dir: Path) -> Iterator[None]:
    """Serialise saving a snapshot and moving the last-baseline mark between runs on different
    namespaces that share one state dir (held for milliseconds, so it simply waits)."""
    try:
        state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        fh = open(state_dir / "store.lock", "a+")  # noqa: SIM115
    except OSError as exc:
        raise DtnkitError(
            f"cannot use the state dir {state_dir}",
            exc.strerror or str(exc),
            "give a writable --state-dir",
        ) from exc
    try:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield
    finally:
        fh.close()


def execute(host: Host, steps: Sequence[Step], *, progress: Any = None) -> Outcome:
    """Write each step, verify it by re-reading; on failure undo everything done, newest first."""
    out = Outcome()
    for step in steps:
        try:
            step.dropped = dropped_by(host, step)
            step.tunable.write(host, step.after)
            now = step.tunable.read(host)
            if isinstance(now, Unavailable) or not step.tunable.satisfies(now, step.after, "exact"):
                shown = now.reason if isinstance(now, Unavailable) else step.tunable.show(now)
                raise DtnkitError(
                    f"verify: failed: '{step.tunable.key}' = '{shown}', expected "
                    f"'{step.tunable.show(step.after)}'",
                    "the kernel or driver accepted the write but kept another value",
                )
        except DtnkitError as exc:
            out.failed, out.error = step, exc
            _undo(host, [*out.done, step], out)
            return out
        except KeyboardInterrupt:
            out.failed = step
            out.error = DtnkitError(
                "interrupted",
                "Ctrl-C or SIGTERM during the run",
                "nothing to do: this run's changes were undone",
                status=ExitStatus.INTERRUPTED,
            )
            _undo(host, [*out.done, step], out)
            return out
        except Exception as exc:  # a bug or an OS failure: still never leave a host half-tuned
            out.failed = step
            out.error = DtnkitError(
                f"unexpected failure writing {step.tunable.key}",
                f"{type(exc).__name__}: {exc}",
                "this run's changes were undone; please report it",
            )
            _undo(host, [*out.done, step], out)
            return out
        out.done.append(step)
        if progress is not None:
            progress(step)
    return out


TUNED = "tuned/"


def execute_tuned_first(
    host: Host,
    steps: Sequence[Step],
    replan: Callable[[], list[Step]],
    *,
    progress: Any = None,
    put_back: Callable[[Outcome], None] | None = None,
) -> Outcome:
    """:func:`execute`, switching the TuneD profile first when ``steps`` do.

    A TuneD profile writes sysctls of its own when it is switched to (network-throughput:
    tcp_rmem and tcp_wmem at 16 MiB), so it goes first; then ``replan()`` plans the rest on
    what TuneD left (read afresh: a value TuneD lowered is planned again) and those are
    written; then every written value is read once more, so the end state is verified whole,
    after TuneD.  On a failure after the switch everything is undone, newest first, and
    ``put_back`` writes the baseline's values again (switching TuneD back may leave its own).
    """
    first = [s for s in steps if s.tunable.key.startswith(TUNED)]
    if not first:
        return execute(host, steps, progress=progress)
    out = execute(host, first, progress=progress)
    if not out.ok:
        return out
    host.refresh()
    try:
        rest = [s for s in replan() if not s.tunable.key.startswith(TUNED)]
    except (DtnkitError, KeyboardInterrupt) as exc:
        out.error = (
            exc
            if isinstance(exc, DtnkitError)
            else DtnkitError(
                "interrupted",
                "Ctrl-C or SIGTERM during the run",
                "nothing to do: this run's changes were undone",
                status=ExitStatus.INTERRUPTED,
            )
        )
        _undo(host, first, out)
        if put_back is not None:
            put_back(out)
        return out
    more = execute(host, rest, progress=progress)
    out.done += more.done
    if not more.ok:
        out.failed, out.error = more.failed, more.error
        out.rollback_errors += more.rollback_errors
        _undo(host, first, out)
    else:
        _verify_end_state(host, out)
    if not out.ok and put_back is not None:
        put_back(out)
    return out


def _verify_end_state(host: Host, out: Outcome) -> None:
    """Read every written value again once all are written; one that no longer holds (a later
    step, TuneD, undid it) fails the run, which is then undone."""
    host.refresh()
    for step in out.done:
        now = step.tunable.read(host)
        if isinstance(now, Unavailable) or not step.tunable.satisfies(now, step.after, "exact"):
            shown = now.reason if isinstance(now, Unavailable) else step.tunable.show(now)
            out.failed = step
            out.error = DtnkitError(
                f"verify: failed: '{step.tunable.key}' = '{shown}', expected "
                f"'{step.tunable.show(step.after)}'",
                "it held when written, but not once every step was done (the TuneD profile "
                "switched to sets it too)",
                "leave --tuned out, or give TuneD a profile that does not set it",
            )
            _undo(host, out.done, out)
            return


def dropped_by(host: Host, step: Step) -> list[tuple[Tunable, Any]]:
    """What the kernel will remove for good when ``step`` is written, as it is now (only what
    is there: an interface with no address of its own has nothing to lose)."""
    out = []
    for tunable in step.tunable.drops(step.after, host):
        value = tunable.read(host)
        if not isinstance(value, Unavailable) and value:
            out.append((tunable, value))
    return out


def _undo(host: Host, steps: Sequence[Step], out: Outcome) -> None:
    for step in _undo_order(host, steps):
        try:
            now = step.tunable.read(host)
            if isinstance(now, Unavailable) or not step.tunable.satisfies(
                now, step.before, "exact"
            ):
                step.tunable.write(host, step.before)
        except DtnkitError as exc:
            out.rollback_errors.append(f"{step.tunable.key}: {exc.what}: {exc.why}")
            _not_put_back(step, out)
            continue
        except Exception as exc:  # go on undoing the older steps
            out.rollback_errors.append(f"{step.tunable.key}: {type(exc).__name__}: {exc}")
            _not_put_back(step, out)
            continue
        _put_back_dropped(host, step, out)


def _put_back_dropped(host: Host, step: Step, out: Outcome) -> None:
    """Once ``step``'s old value is back, what its write made the kernel remove (an
    interface's IPv6 addresses and routes): each that is missing is added again."""
    if step.dropped:
        host.refresh()  # the kernel changed more than the step's own value
    for tunable, value in step.dropped:
        try:
            now = tunable.read(host)
            if isinstance(now, Unavailable) or not tunable.satisfies(now, value, "exact"):
                tunable.write(host, value)
        except DtnkitError as exc:
            out.rollback_errors.append(f"{tunable.key}: {exc.what}: {exc.why}")
        except Exception as exc:  # go on undoing the older steps
            out.rollback_errors.append(f"{tunable.key}: {type(exc).__name__}: {exc}")


def _not_put_back(step: Step, out: Outcome) -> None:
    for tunable, value in step.dropped:
        out.rollback_errors.append(
            f"{tunable.key}: not put back ({tunable.show(value)}): {step.tunable.key} is not "
            f"back at {step.tunable.show(step.before)}"
        )


def _undo_order(host: Host, steps: Sequence[Step]) -> list[Step]:
    """Newest first, with the MTU steps in the order the kernel accepts going back (a bridge
    after its ports, see :func:`mtu_stack_order`)."""
    order = list(reversed(steps))
    slots = [i for i, s in enumerate(order) if _is_mtu(s)]
    if len(slots) < 2:
        return order
    try:
        ifaces = facts.interfaces(host)
    except DtnkitError:
        return order
    ordered = _mtu_order(
        [order[i] for i in slots], ifaces, lambda s: (_num(s.after), _num(s.before))
    )
    for slot, step in zip(slots, ordered, strict=True):
        order[slot] = step
    return order


def apply(
    host: Host,
    read: Callable[[Host], Audit],
    store: Store,
    *,
    on_request: Sequence[str] = (),
    do_persist: bool = False,
    label: str = "",
    progress: Any = None,
    wait_s: float = 0.0,
    on_wait: Callable[[str], None] | None = None,
    on_plan: Callable[[Audit, list[Step]], None] | None = None,
    allow_unsafe: Sequence[str] = (),
) -> Outcome:
    """Read, plan, save the baseline, write and verify, all under the target's lock.

    A planned value a kind calls unsafe (:meth:`Tunable.unsafe`) is refused (BadInput, before
    the baseline) unless ``allow_unsafe`` names its key.

    ``read(host)`` makes the audit; it runs after the lock is taken, on a host whose cached
    reads were dropped, so the plan and the baseline are what the host holds now.  With nothing
    to change (and no --persist) nothing is saved: ``baseline`` is None and ``planned`` empty.
    """
    require_root(host, "dtnkit tune apply")
    with lock(host, store.state_dir, wait_s=wait_s, on_wait=on_wait) as held:
        host.refresh()
        audit = read(host)
        if do_persist and not audit.ctx.env.initial_netns:
            raise BadInput(
                "--persist cannot be used in a network namespace",
                "it writes the host's boot-time configuration",
                "apply without --persist, or run on the host itself",
            )
        steps = plan(audit, on_request)
        refuse_unsafe(steps, allow_unsafe, f"profile {audit.profile.name}")
        if not steps and not do_persist:
            # the host holds what the profile wants: an earlier apply that did not finish
            # has nothing left half-done
            with store_lock(store.state_dir):
                store.clear_unfinished(scope_here(host))
            out = Outcome(audit=audit, held=held)
            held.released = time.time()
            return out
        if on_plan is not None:
            on_plan(audit, steps)
        values = capture(host, audit.ctx, restorable_tunables(audit.ctx))
        # what a step makes the kernel remove for good (IPv6 off an interface whose MTU goes
        # below 1280): in the baseline, so restore puts it back
        for step in steps:
            values.update((t.key, v) for t, v in dropped_by(host, step))
        values = {key: values[key] for key in sort_keys(list(values))}
        snap = new_snapshot(host, values, label or f"before apply {audit.profile.name}", "baseline")
        if do_persist:
            snap.files = persist.current_files(host)
        scope = scope_of(snap.host)
        with store_lock(store.state_dir):
            # an earlier apply here did not finish (killed, or its undo failed): the host is
            # half-tuned, so this snapshot is kept but the baseline of record stays that
            # apply's, taken before its first write
            earlier = store.unfinished_apply(scope)
            if earlier is not None:
                snap.host["after_unfinished_apply"] = earlier
            store.save(snap)
            if earlier is None:
                store.set_last_baseline(snap.id, scope)
                store.mark_unfinished(snap.id, scope)

        def replan() -> list[Step]:  # after TuneD's switch: plan on what it left
            nonlocal audit
            audit = read(host)
            again = plan(audit, on_request)
            refuse_unsafe(again, allow_unsafe, f"profile {audit.profile.name}")
            return again

        def put_back(failed: Outcome) -> None:  # TuneD switched back: the baseline's values
            _put_back(host, snap, audit.ctx, failed)

        with sigterm_as_interrupt():
            out = execute_tuned_first(host, steps, replan, progress=progress, put_back=put_back)
        out.baseline, out.audit, out.planned, out.held = snap.id, audit, steps, held
        if earlier is not None:
            out.baseline, out.half_tuned = earlier, snap.id
        if out.ok and do_persist:
            try:
                out.persisted = persist.write(
                    host, persist_values(audit, steps), persist_origin(audit)
                )
            except DtnkitError as exc:
                out.error = exc
                _undo(host, out.done, out)
                persist.restore_files(host, snap.files)
        # finished: everything written, or (first apply) everything undone to the baseline
        if out.ok or (earlier is None and not out.rollback_errors):
            with store_lock(store.state_dir):
                store.clear_unfinished(scope)
        held.released = time.time()
    return out


def refuse_empty(snap: Snapshot) -> None:
    """A snapshot without settings is refused (BadInput) before anything is taken or written."""
    if not snap.values:
        raise BadInput(
            f"snapshot {snap.id} holds no settings",
            "its values are empty, so there is nothing to put back (and nothing would be checked)",
            "give a snapshot that holds settings (`dtnkit tune show NAME` lists them)",
        )


def restore_plan(
    host: Host, snap: Snapshot, ctx: Context
) -> tuple[list[Step], list[str], list[str]]:
    """The steps that put ``snap`` back, one line per thing left alone on purpose and why, and
    one line per thing that cannot be put back (its device is gone or was renamed, its tool
    was removed): restore names each and does not call itself complete.

    Inside a namespace nothing global to the host is restored: a sysctl the kernel keeps for
    the host (asked of the kernel, see :mod:`dtnkit.host.sysctl_scope`) and the persist files
    under /etc, which belong to the host, are skipped with a line saying so.
    """
    refuse_empty(snap)
    steps: list[Step] = []
    skipped: list[str] = []
    missing: list[str] = []
    in_netns = not ctx.env.initial_netns
    tunables = [tunable_for_key(key) for key in sort_keys(list(snap.values))]
    profile_groups = {key: item.group for key, item in ctx.profile.items.items()}
    if in_netns:
        prepare_scopes(host, tunables)
    for tunable in tunables:
        key = tunable.key
        if in_netns:
            scope, why = tunable.scope_on(host)
            if scope is Scope.HOST:
                skipped.append(
                    f"{key}: global to the host ({why or 'not per namespace'}); "
                    "not restored inside a namespace"
                )
                continue
        want = snap.values[key]
        now = tunable.read(host)
        if isinstance(now, Unavailable):
            missing.append(f"{key}: {_unavailable(tunable, now, host)}")
            continue
        if not tunable.satisfies(now, want, "exact"):
            steps.append(
                Step(
                    tunable,
                    now,
                    want,
                    group_of(key, profile_groups),
                    tunable.unsafe(want, host) or "",
                )
            )
    if in_netns:
        skipped += [
            f"{path}: a host file; not restored inside a namespace (restore it on the host itself)"
            for path in sorted(snap.files)
        ]
    missing += bridges_set_by_hand(host, snap, ctx)
    return mtu_stack_order(steps, ctx), skipped, missing


def _unavailable(tunable: Tunable, now: Unavailable, host: Host) -> str:
    """Why a snapshot's setting cannot be put back, with what to do."""
    dev = tunable.device
    if dev is not None and not host.exists(f"/sys/class/net/{dev}"):
        return (
            f"no interface {dev} here (renamed or removed since the snapshot); rename it "
            f"back or restore this setting by hand"
        )
    return f"cannot be read here ({now.reason}); not restored"


def _put_back(host: Host, snap: Snapshot, ctx: Context, out: Outcome) -> None:
    """After an undo that switched TuneD back: write the baseline's values again where they
    differ (TuneD may leave values of its own); what cannot be is a rollback error."""
    try:
        steps = restore_plan(host, snap, ctx)[0]
    except DtnkitError as exc:
        out.rollback_errors.append(f"baseline {snap.id}: {exc.what}: {exc.why}")
        return
    for step in steps:
        try:
            step.tunable.write(host, step.after)
        except DtnkitError as exc:
            out.rollback_errors.append(f"{step.tunable.key}: {exc.what}: {exc.why}")


def restore_steps(host: Host, snap: Snapshot, ctx: Context) -> list[Step]:
    return restore_plan(host, snap, ctx)[0]


def _is_mtu(step: Step) -> bool:
    return step.tunable.key.startswith("link/") and step.tunable.key.endswith("/mtu")


def mtu_stack_order(steps: list[Step], ctx: Context) -> list[Step]:
    """MTU steps in an order the kernel accepts: lowered VLANs, bonds, then members; raised
    members, bonds, then VLANs (a VLAN's MTU may not exceed its lower device's); a bridge
    after its ports either way.  Other steps keep their places.

    A bridge's MTU follows the smallest of its ports' until it is set by hand, and from then on
    the kernel keeps it (BROPT_MTU_SET_BY_USER; only re-creating the bridge clears it).  So its
    ports go first: a bridge that follows them is then already at its value, and writing the
    same value is no change to the kernel, which leaves it following."""
    slots = [i for i, s in enumerate(steps) if _is_mtu(s)]
    ordered = _mtu_order(
        [steps[i] for i in slots], ctx.ifaces, lambda s: (_num(s.before), _num(s.after))
    )
    out = list(steps)
    for slot, step in zip(slots, ordered, strict=True):
        out[slot] = step
    return out


def _mtu_order(
    mtu: list[Step], ifaces: dict[str, facts.Interface], change: Callable[[Step], tuple[int, int]]
) -> list[Step]:
    """``mtu`` (MTU steps) in the kernel's order, each step's (from, to) given by ``change``:
    lowered devices top down, raised ones bottom up, lowered bridges last."""

    def depth(step: Step) -> int:
        return facts.stack_depth(ifaces, str(step.tunable.device))

    def bridge(step: Step) -> bool:
        iface = ifaces.get(str(step.tunable.device))
        return iface is not None and iface.kind == "bridge" and bool(iface.members)

    lowered = [s for s in mtu if change(s)[1] < change(s)[0]]
    down = sorted((s for s in lowered if not bridge(s)), key=lambda s: -depth(s))
    up = sorted((s for s in mtu if change(s)[1] >= change(s)[0]), key=depth)
    return down + up + sorted((s for s in lowered if bridge(s)), key=depth)


def bridges_set_by_hand(host: Host, snap: Snapshot, ctx: Context) -> list[str]:
    """A line for each bridge whose MTU followed its ports' in ``snap`` but no longer can: it
    differs now from the smallest of its ports' (the kernel re-adjusts a following bridge on
    every change of a port, so it was set by hand since), and the kernel offers no way back
    but re-creating the bridge.  Restore puts its value back; the following it cannot."""
    lines = []
    for name, iface in sorted(ctx.ifaces.items()):
        key = f"link/{name}/mtu"
        if iface.kind != "bridge" or key not in snap.values:
            continue
        ports = [ctx.ifaces[p] for p in iface.members if p in ctx.ifaces]
        if not ports:
            continue
        then = min(_num(snap.values.get(f"link/{p.name}/mtu", p.mtu)) for p in ports)
        smallest = min(p.mtu for p in ports)
        if snap.values[key] == then and iface.mtu != smallest:
            lines.append(
                f"{key}: {name} followed its ports' MTU in the snapshot, but its MTU was set "
                f"by hand since ({iface.mtu} while its smallest port has {smallest}), and the "
                "kernel keeps a bridge's MTU set by hand until the bridge is re-created; "
                "restore puts its value back, not the following (re-create the bridge to have "
                "it again)"
            )
    return lines


def _num(value: Any) -> int:
    return value if isinstance(value, int) else 0


def restore(
    host: Host,
    snap: Snapshot,
    store: Store,
    ctx: Context,
    *,
    progress: Any = None,
    wait_s: float = 0.0,
    on_wait: Callable[[str], None] | None = None,
    allow_unsafe: Sequence[str] = (),
) -> Outcome:
    """Put back ``snap`` under the same lock as apply, comparing with values read under it;
    an unsafe value is refused unless ``allow_unsafe`` names its key (as for apply)."""
    require_root(host, "dtnkit tune restore")
    refuse_empty(snap)  # before the lock: a --tree run's lock file is in the state dir
    with lock(host, store.state_dir, wait_s=wait_s, on_wait=on_wait) as held:
        host.refresh()
        steps, skipped, missing = restore_plan(host, snap, ctx)
        refuse_unsafe(steps, allow_unsafe, f"snapshot {snap.id}")

        def replan() -> list[Step]:  # TuneD switched back: what is left to put back
            again = restore_plan(host, snap, ctx)[0]
            refuse_unsafe(again, allow_unsafe, f"snapshot {snap.id}")
            return again

        with sigterm_as_interrupt():
            out = execute_tuned_first(host, steps, replan, progress=progress)
        out.skipped, out.not_restored = skipped, missing
        if out.ok and not missing:  # the scope holds a snapshot's values: nothing half-done
            with store_lock(store.state_dir):
                store.clear_unfinished(scope_here(host))
        if out.ok and snap.files and ctx.env.initial_netns:
            persist.restore_files(host, snap.files)
            out.persisted = sorted(snap.files)
        out.planned, out.held = steps, held
        held.released = time.time()
    return out
