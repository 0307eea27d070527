"""`dtnkit tune apply` and `dtnkit tune restore`: the two commands that write the host, each
under its namespace's lock, verified, and undone if a write fails."""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from dtnkit.cli.hosts import host_options, make_host
from dtnkit.cli.options import CliCommand, db_option, pass_env
from dtnkit.cli.output import Printer, emit, for_people, format_option
from dtnkit.cli.tune import tables
from dtnkit.cli.tune.options import (
    check_allow_unsafe,
    group_flags,
    parse_wait,
    selection_options,
    state_option,
    unsafe_option,
    wait_option,
)
from dtnkit.cli.tune.snapshots import same_namespace
from dtnkit.db.location import Location
from dtnkit.environment import DEFAULT_STATE_DIR, Environment
from dtnkit.errors import ExitStatus
from dtnkit.host.host import Host
from dtnkit.measure.store import ResultStore
from dtnkit.tune import apply
from dtnkit.tune.audit import build_context
from dtnkit.tune.judging import Judging
from dtnkit.tune.profile import load_profile
from dtnkit.tune.snapshot import Store, scope_here, state_dir_error


def waiting(env: Environment) -> Callable[[str], None]:
    """Say once, on stderr (stdout may hold JSON), that the run waits for the lock."""

    def say(message: str) -> None:
        click.echo(f"dtnkit: {message}", file=env.stderr)

    return say


def restore_hint(baseline: str | None, scope: str, state_dir: Path) -> str:
    """The restore command for ``baseline`` that acts on the same scope (``host``, ``netns
    NAME``, ``tree PATH``: see :func:`dtnkit.tune.snapshot.scope_here`) and state dir as the
    run that printed it, so it can be pasted as is.  A namespace with no name has no option
    that reaches it: the command is to be run inside it, and says so."""
    argv = ["dtnkit", "tune", "restore"] + ([baseline] if baseline else [])
    kind, _, name = scope.partition(" ")
    if kind in ("netns", "tree"):
        argv += [f"--{kind}", name]
    if state_dir.absolute() != DEFAULT_STATE_DIR:
        argv += ["--state-dir", str(state_dir.absolute())]
    hint = shlex.join(argv)
    if kind == "netns-id":
        hint += f"  # inside the same unnamed namespace (id {name})"
    return hint


@contextmanager
def state_errors(state_dir: Path, what: str) -> Iterator[None]:
    """An OSError on the state dir (the lock, the baseline) is one error line, not a traceback;
    it happens before the first write to the host."""
    try:
        yield
    except OSError as exc:
        # host writes raise DtnkitError; an OSError here is the state dir's (a full one fails
        # in write() or fsync(), which name no file)
        if exc.filename is not None and not str(exc.filename).startswith(str(state_dir)):
            raise
        raise state_dir_error(state_dir, what, exc) from exc


@click.command("apply", cls=CliCommand)
@selection_options
@state_option
@format_option
@click.option("--dry-run", is_flag=True, help="Print the plan; write nothing.")
@click.option(
    "--persist",
    is_flag=True,
    help="Also write /etc/sysctl.d/90-dtnkit.conf and a udev rule for interfaces.",
)
@click.option("--mtu", "want_mtu", is_flag=True, help="Also apply the profile's MTU.")
@click.option(
    "--tuned", "want_tuned", is_flag=True, help="Also switch the TuneD profile (tuned-adm)."
)
@click.option("--label", default="", help="Label of the baseline snapshot.")
@unsafe_option
@wait_option
@click.option(
    "--from-experiment",
    "experiment_id",
    default=None,
    metavar="ID",
    help="Apply only the groups that helped in this experiment (its profile, RTT, "
    "speed and interfaces).",
)
@db_option(
    help="Results store holding the experiment (default $DTNKIT_DB or "
    "/var/lib/dtnkit/results.sqlite)."
)
@pass_env
def apply_cmd(
    env: Environment,
    groups: tuple[str, ...],
    judging: Judging,
    state_dir: Path,
    fmt: str,
    dry_run: bool,
    persist: bool,
    want_mtu: bool,
    want_tuned: bool,
    label: str,
    allow_unsafe: tuple[str, ...],
    wait: str,
    experiment_id: str | None,
    db: Location,
) -> int:
    """Apply a profile, one group at a time, after saving a baseline.

    Every write is verified; if one fails, everything this run changed is put back.  Exit 0
    when done, 16 when some items could not be decided (the plan says what to give, e.g.
    --speed), 4 or 5 when a write failed.
    """
    if experiment_id is not None:
        exp = ResultStore(db).get_experiment(experiment_id)
        groups = tuple(exp.get("helped", []))
        judging = from_experiment(judging, exp["spec"])
        if not groups:
            emit(
                env,
                {"ok": True, "experiment": experiment_id, "applied": [], "baseline": None},
                fmt,
                lambda p: p.echo(
                    f"experiment {experiment_id} found no group that helps: nothing to apply"
                ),
                indent=None,
            )
            return int(ExitStatus.OK)
        label = label or f"from {experiment_id}"
    wait_s = parse_wait(wait)
    allow_unsafe = check_allow_unsafe(allow_unsafe)
    host = make_host(judging.netns, judging.tree, read_only=dry_run)
    prof = judging.load_profile()
    on_request = [n for n, on in (("mtu", want_mtu), ("tuned", want_tuned)) if on]

    def read(h: Host) -> Any:
        return judging.audit(h, prof, groups)

    def hints(result: Any) -> dict[str, Any]:
        """What could not be decided, and the commands that go on from here."""
        undecided = apply.undecided(result)
        gives = [g for g in dict.fromkeys(u["give"] for u in undecided) if g]
        again = judging.command(
            "tune",
            "apply",
            "--dry-run",
            extra=[*group_flags(groups), *[w for g in gives for w in (g, g.lstrip("-").upper())]],
        )
        # an item no option decides (its why says what could not be read) gets no command
        return {"undecided": undecided, "decide": again if gives else None}

    if dry_run:
        result = read(host)
        steps = apply.plan(result, on_request)
        skipped = apply.skipped_on_request(result, on_request)
        more = hints(result)
        go = judging.command("tune", "apply", extra=group_flags(groups)) if steps else None
        emit(
            env,
            {
                "dry_run": True,
                "plan": [s.as_dict() for s in steps],
                "skipped_on_request": [f.key for f in skipped],
                **more,
                "next": go,
            },
            fmt,
            lambda p: tables.plan(
                p.console,
                steps,
                skipped,
                dry_run=True,
                undecided=more["undecided"],
                decide=more["decide"],
                next_cmd=go,
                allow_unsafe=allow_unsafe,
            ),
        )
        return int(ExitStatus.UNDECIDED if more["undecided"] else ExitStatus.OK)
    store = Store(state_dir)
    person = for_people(env, fmt)

    def show_plan(result: Any, steps: list[apply.Step]) -> None:
        if person is not None:
            skipped = apply.skipped_on_request(result, on_request)
            tables.plan(person.console, steps, skipped, dry_run=False, allow_unsafe=allow_unsafe)

    # read, plan, baseline, write and verify all happen under the namespace's lock
    with state_errors(state_dir, "cannot save the baseline or take the lock"):
        out = apply.apply(
            host,
            read,
            store,
            on_request=on_request,
            do_persist=persist,
            label=label,
            progress=progress(person),
            wait_s=wait_s,
            on_wait=waiting(env),
            on_plan=show_plan,
            allow_unsafe=allow_unsafe,
        )
    assert out.audit is not None
    result = out.audit
    skipped = apply.skipped_on_request(result, on_request)
    skipped_keys = [f.key for f in skipped]
    more = hints(result)
    done = ExitStatus.UNDECIDED if more["undecided"] else ExitStatus.OK
    if out.baseline is None and out.ok:
        emit(
            env,
            {
                "ok": True,
                "baseline": None,
                "applied": [],
                "skipped_on_request": skipped_keys,
                "lock": out.as_dict()["lock"],
                **more,
            },
            fmt,
            lambda p: tables.nothing_to_do(
                p.console, result, skipped, undecided=more["undecided"], decide=more["decide"]
            ),
        )
        return int(done)
    # the scope the baseline was kept in (`ip netns exec NS dtnkit tune apply`: NS's)
    undo = restore_hint(out.baseline, scope_here(host), state_dir)
    emit(
        env,
        {**out.as_dict(), "undo": undo, "skipped_on_request": skipped_keys, **more},
        fmt,
        lambda p: tables.outcome(
            p.console, out, "apply", undo, undecided=more["undecided"], decide=more["decide"]
        ),
    )
    status = outcome_status(out)
    return int(done) if status == ExitStatus.OK else status


def from_experiment(judging: Judging, spec: dict[str, Any]) -> Judging:
    """The judging an experiment ran with (its profile, RTT, and the speed and interfaces it
    recorded), in the scope this run works in."""
    speed = spec.get("speed_mbps")
    ifaces = spec.get("ifaces")
    exact = spec.get("exact")
    return dataclasses.replace(
        judging,
        profile=str(spec["profile"]),
        rtt_ms=float(spec["rtt_ms"]),
        speed_mbps=int(speed) if isinstance(speed, int) else judging.speed_mbps,
        ifaces=tuple(str(i) for i in ifaces) if isinstance(ifaces, list) else judging.ifaces,
        exact=exact if isinstance(exact, bool) else judging.exact,
    )


def progress(person: Printer | None) -> Callable[[apply.Step], None] | None:
    """A tick per verified step, for people only."""
    if person is None:
        return None
    con = person.console

    def step_done(step: apply.Step) -> None:
        tables.step_done(con, step)

    return step_done


def outcome_status(out: apply.Outcome) -> int:
    if out.ok:
        return int(ExitStatus.OK)
    if out.error is not None and out.error.status == ExitStatus.INTERRUPTED:
        return int(ExitStatus.INTERRUPTED)
    return int(ExitStatus.ROLLBACK_FAILED if out.rollback_errors else ExitStatus.PARTIAL_APPLY)


@click.command("restore", cls=CliCommand)
@click.argument("snapshot", required=False)
@host_options
@state_option
@format_option
@click.option("--dry-run", is_flag=True, help="Print what would change; write nothing.")
@unsafe_option
@wait_option
@pass_env
def restore_cmd(
    env: Environment,
    snapshot: str | None,
    netns: str | None,
    tree: Path | None,
    state_dir: Path,
    fmt: str,
    dry_run: bool,
    allow_unsafe: tuple[str, ...],
    wait: str,
) -> int:
    """Put back a snapshot's exact values (default: the baseline of the last apply)."""
    wait_s = parse_wait(wait)
    allow_unsafe = check_allow_unsafe(allow_unsafe)
    store = Store(state_dir)
    host = make_host(netns, tree, read_only=dry_run)
    scope = scope_here(host)
    snap = store.load(snapshot or "last", scope)  # `last`: this scope's last one
    same_namespace(snap.id, snap.host, host)
    ctx = build_context(host, load_profile("dtn", ()))
    if dry_run:
        steps, skipped, missing = apply.restore_plan(host, snap, ctx)
        emit(
            env,
            {
                "dry_run": True,
                "snapshot": snap.id,
                "plan": [s.as_dict() for s in steps],
                "skipped": skipped,
                "not_restored": missing,
            },
            fmt,
            lambda p: tables.restore_plan(
                p.console, steps, skipped, missing, allow_unsafe=allow_unsafe
            ),
        )
        return 0
    with state_errors(state_dir, "cannot take the lock"):
        out = apply.restore(
            host,
            snap,
            store,
            ctx,
            progress=progress(for_people(env, fmt)),
            wait_s=wait_s,
            on_wait=waiting(env),
            allow_unsafe=allow_unsafe,
        )
    emit(
        env,
        {"snapshot": snap.id, **out.as_dict()},
        fmt,
        lambda p: tables.outcome(
            p.console, out, f"restore of {snap.id}", restore_hint(snap.id, scope, state_dir)
        ),
    )
    if out.ok and out.not_restored:
        return int(ExitStatus.DRIFT)  # the rest was put back; these still differ
    return outcome_status(out)
