"""`dtnkit tune`: audit, apply, save, list, show, diff, restore, delete, profiles."""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from dtnkit.cli.judging_options import group_option, judging_options
from dtnkit.cli.options import (
    CliGroup,
    db_option,
    pass_env,
    state_dir_option,
)
from dtnkit.cli.output import Printer, emit, for_people, format_option
from dtnkit.db.location import Location
from dtnkit.environment import DEFAULT_STATE_DIR, Environment
from dtnkit.errors import BadInput, ExitStatus
from dtnkit.host.host import Host
from dtnkit.host.sysctl_scope import PROBE
from dtnkit.measure.store import ResultStore
from dtnkit.tune import apply, pairing
from dtnkit.tune.audit import build_context
from dtnkit.tune.judging import Judging
from dtnkit.tune.keys import device_of, group_of, typed, unit_of, with_device
from dtnkit.tune.profile import KNOWN_KEYS, USER_PROFILE_DIR, load_profile, shipped_names
from dtnkit.tune.registry import tunable_for_key
from dtnkit.tune.snapshot import (
    Store,
    describe_scope,
    diff,
    load_side,
    netns_identity,
    netns_named,
    new_snapshot,
    root_identity,
    scope_here,
    scope_of,
    scope_options,
    state_dir_error,
)
from dtnkit.tune.validation import check_profile
from dtnkit.units import parse_duration

#: the longest --wait for the lock of apply and restore
MAX_WAIT_S = 600.0


def _tables() -> Any:
    """The tune tables (:mod:`dtnkit.cli.tune_render`)."""
    # rich only for a table a person reads, as cli/output.py (a JSON audit draws none)
    from dtnkit.cli import tune_render

    return tune_render


_NETNS = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")

F = Callable[..., Any]


def _host_options(f: F) -> F:
    f = click.option(
        "--netns", metavar="NAME", help="Work inside this network namespace (ip netns)."
    )(f)
    f = click.option(
        "--tree",
        type=click.Path(path_type=Path),
        metavar="DIR",
        help="Read a captured host tree (proc/, sys/, cmd/) instead of this host.",
    )(f)
    return f


def _state_option(f: F) -> F:
    return state_dir_option(
        metavar="DIR",
        show_default="/var/lib/dtnkit or $DTNKIT_STATE_DIR",
        help="Where snapshots live.",
    )(f)


def _selection_options(f: F) -> F:
    """--group and the judging flags (profile, RTT, speed, interfaces, --exact, the scope):
    the command gets ``groups`` and one ``judging``."""
    f = judging_options(iface=True, exact=True, netns=True, tree=True)(f)
    return group_option()(f)


def make_host(netns: str | None, tree: Path | None, *, read_only: bool = False) -> Host:
    if tree is not None:
        if netns:
            raise BadInput("--tree and --netns cannot be combined", "", "pick one")
        return Host.from_tree(tree, read_only=read_only)
    if netns is not None:
        if not _NETNS.match(netns):
            raise BadInput(
                f"bad namespace name {netns!r}",
                "names are letters, digits, '.', '_' and '-'",
                "see `ip netns list`",
            )
        if not Path("/run/netns", netns).exists():
            raise BadInput(
                f"no network namespace {netns!r}", "it is not in /run/netns", "see `ip netns list`"
            )
        PROBE.warm()  # the sysctl scope probe's child starts beside the namespace's helper
    return Host.live(netns, read_only=read_only)


def _unsafe_option(f: F) -> F:
    return click.option(
        "--allow-unsafe",
        "allow_unsafe",
        multiple=True,
        metavar="KEY",
        help="Write this key's value even though it weakens security or breaks connectivity "
        "(docs/profiles.md lists them), e.g. sysctl/net.ipv4.tcp_syncookies or "
        "link/*/mtu; repeatable.",
    )(f)


def check_allow_unsafe(keys: tuple[str, ...]) -> tuple[str, ...]:
    """Each --allow-unsafe KEY names a setting (a profile key with * for its device, or one
    key): BadInput otherwise."""
    for key in keys:
        if "*" in key:
            if key not in KNOWN_KEYS:
                raise BadInput(
                    f"--allow-unsafe {key!r} names no setting",
                    "a pattern must be a profile key such as link/*/mtu",
                    "see docs/profiles.md for the keys",
                )
        else:
            tunable_for_key(key)
    return keys


def _wait_option(f: F) -> F:
    return click.option(
        "--wait",
        "wait",
        default="0s",
        show_default=True,
        metavar="DURATION",
        help="If another apply or restore holds this namespace's lock, wait up to this long "
        f"(at most {MAX_WAIT_S:g}s) instead of exiting 8 at once.",
    )(f)


def parse_wait(text: str) -> float:
    """--wait as seconds (a bare number is seconds, as every duration flag)."""
    return parse_duration(text, "--wait", lo=0.0, hi=MAX_WAIT_S)


def _waiting(env: Environment) -> Callable[[str], None]:
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
def _state_errors(state_dir: Path, what: str) -> Iterator[None]:
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


def _profile(name: str, dirs: tuple[Path, ...]) -> Any:
    prof = load_profile(name, dirs or (USER_PROFILE_DIR,))
    check_profile(prof)  # `tune profiles NAME` shows only what apply would accept
    return prof


@click.group(cls=CliGroup)
def tune() -> None:
    """Audit and tune host settings, with snapshots to restore them."""


@tune.command()
@_selection_options
@format_option
@pass_env
def audit(env: Environment, groups: tuple[str, ...], judging: Judging, fmt: str) -> int:
    """Compare current settings with a profile.  Reads only.

    Exit 0 when every selected item complies, 3 when any differs or is unknown (the output
    says what to give, e.g. --speed for a NIC that reports none).
    """
    host = make_host(judging.netns, judging.tree, read_only=True)  # a namespace's helper
    result = judging.audit(host, judging.load_profile(), groups)  # starts while these load

    def table(p: Printer) -> None:
        nxt = judging.command("tune", "apply", "--dry-run", extra=_group_flags(groups))
        _tables().audit_table(p.console, result, next_cmd=nxt)

    emit(env, result.as_dict(), fmt, table)
    return int(ExitStatus.OK if result.compliant else ExitStatus.DRIFT)


def _group_flags(groups: tuple[str, ...]) -> list[str]:
    return ["--group", ",".join(groups)] if groups else []


@tune.command(name="apply")
@_selection_options
@_state_option
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
@_unsafe_option
@_wait_option
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
            extra=[*_group_flags(groups), *[w for g in gives for w in (g, g.lstrip("-").upper())]],
        )
        # an item no option decides (its why says what could not be read) gets no command
        return {"undecided": undecided, "decide": again if gives else None}

    if dry_run:
        result = read(host)
        steps = apply.plan(result, on_request)
        skipped = apply.skipped_on_request(result, on_request)
        more = hints(result)
        go = judging.command("tune", "apply", extra=_group_flags(groups)) if steps else None
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
            lambda p: _tables().plan(
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
            _tables().plan(person.console, steps, skipped, dry_run=False, allow_unsafe=allow_unsafe)

    # read, plan, baseline, write and verify all happen under the namespace's lock
    with _state_errors(state_dir, "cannot save the baseline or take the lock"):
        out = apply.apply(
            host,
            read,
            store,
            on_request=on_request,
            do_persist=persist,
            label=label,
            progress=_progress(person),
            wait_s=wait_s,
            on_wait=_waiting(env),
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
            lambda p: _tables().nothing_to_do(
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
        lambda p: _tables().outcome(
            p.console, out, "apply", undo, undecided=more["undecided"], decide=more["decide"]
        ),
    )
    status = _outcome_status(out)
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


def _progress(person: Printer | None) -> Callable[[apply.Step], None] | None:
    """A tick per verified step, for people only."""
    if person is None:
        return None
    con = person.console

    def step_done(step: apply.Step) -> None:
        _tables().step_done(con, step)

    return step_done


def _outcome_status(out: apply.Outcome) -> int:
    if out.ok:
        return int(ExitStatus.OK)
    if out.error is not None and out.error.status == ExitStatus.INTERRUPTED:
        return int(ExitStatus.INTERRUPTED)
    return int(ExitStatus.ROLLBACK_FAILED if out.rollback_errors else ExitStatus.PARTIAL_APPLY)


@tune.command()
@click.option("--label", default="manual", show_default=True)
@_host_options
@_state_option
@format_option
@pass_env
def save(
    env: Environment, label: str, netns: str | None, tree: Path | None, state_dir: Path, fmt: str
) -> int:
    """Save every restorable setting to a snapshot."""
    host = make_host(netns, tree, read_only=True)
    snap = new_snapshot(host, apply.live_values(host), label, "manual")
    path = Store(state_dir).save(snap)
    emit(
        env,
        {"id": snap.id, "path": str(path), "values": len(snap.values)},
        fmt,
        lambda p: _tables().saved(p.console, snap, path),
        indent=None,
    )
    return 0


@tune.command(name="list")
@_state_option
@format_option
@pass_env
def list_cmd(env: Environment, state_dir: Path, fmt: str) -> int:
    """List saved snapshots, each with its scope (host, netns NAME or tree PATH)."""
    store = Store(state_dir)
    rows = []
    last: dict[str, str | None] = {}  # each scope's last baseline
    unfinished: dict[str, str | None] = {}  # each scope's apply that did not finish
    for snap_id in store.ids():
        try:
            snap = store.load(snap_id)
            scope = scope_of(snap.host)
            if scope not in last:
                last[scope] = store.last_baseline(scope)
                unfinished[scope] = store.unfinished_apply(scope)
            incomplete = None
            if snap.id == unfinished[scope]:
                incomplete = "its apply did not finish (killed, or still running)"
            elif snap.host.get("after_unfinished_apply"):
                incomplete = (
                    f"half-tuned: taken after apply of "
                    f"{snap.host['after_unfinished_apply']} did not finish"
                )
            rows.append(
                {
                    "id": snap.id,
                    "kind": snap.kind,
                    "label": snap.label,
                    "created": snap.created,
                    "scope": scope,
                    "netns": snap.host.get("netns"),
                    "values": len(snap.values),
                    "last_baseline": snap.id == last[scope],
                    "incomplete": incomplete,
                }
            )
        except BadInput as exc:
            rows.append(
                {
                    "id": snap_id,
                    "kind": "damaged",
                    "label": exc.why,
                    "created": "",
                    "scope": None,
                    "netns": None,
                    "values": 0,
                    "last_baseline": False,
                    "incomplete": None,
                }
            )
    emit(env, rows, fmt, lambda p: _tables().snapshot_list(p.console, rows, store.dir))
    return 0


def _same_namespace(name: str, facts: dict[str, Any], host: Host) -> None:
    """Refuse to compare or restore a snapshot taken in another network namespace than the
    one this run works in, saying where it was taken and how to get there."""
    if not facts:
        return
    here, there = netns_identity(host), facts.get("netns_id")
    earlier = ""
    if (
        here is not None and there is not None and facts.get("hostname") == os.uname().nodename
    ):  # = gethostname()
        # both live on this machine: compare the namespaces themselves, so a snapshot taken
        # under `ip netns exec NS` (or in a namespace with no name) is told from one of the
        # root namespace, whatever name each was reached by
        if here == there:
            return
        named = facts.get("netns") or netns_named(there)
        if there == root_identity():
            taken = "host"
        elif named:
            taken = f"netns {named}"
            if netns_named(here) == named:  # the name now stands for another namespace
                earlier = (
                    f"an earlier namespace named {named} (id {there}; deleted and made again since)"
                )
        else:
            taken = f"netns-id {there}"
    elif (facts.get("netns") or None) == (host.netns or None):
        return
    else:
        taken = scope_of({**facts, "root": "/"})
    opts = scope_options(taken)
    if earlier:
        step = "give a snapshot taken since it was made, or `dtnkit tune save` one"
    elif taken.startswith("netns-id "):
        step = "run the command inside that namespace (e.g. with nsenter --net)"
    else:
        step = f"give {opts}" if opts else "run without --netns"
    raise BadInput(
        f"snapshot {name} was taken in {earlier or describe_scope(taken)}",
        f"this run works in {describe_scope(scope_here(host))}",
        step,
    )


@tune.command()
@click.argument("snapshot")
@_state_option
@format_option
@pass_env
def show(env: Environment, snapshot: str, state_dir: Path, fmt: str) -> int:
    """Show one snapshot (a name, unique prefix, label, or `last`)."""
    snap = Store(state_dir).load(snapshot)
    emit(env, snap.as_dict(), fmt, lambda p: _tables().snapshot(p.console, snap))
    return 0


@tune.command(name="diff")
@click.argument("a")
@click.argument("b", required=False)
@click.option(
    "--map",
    "maps",
    multiple=True,
    metavar="A_DEV=B_DEV",
    help="Compare A's interface A_DEV with B's B_DEV (repeatable, or comma-"
    "separated).  Without it, interfaces whose names differ pair by role "
    "(NIC, bond member, bond, VLAN) when each side has as many.",
)
@_host_options
@_state_option
@format_option
@pass_env
def diff_cmd(
    env: Environment,
    a: str,
    b: str | None,
    maps: tuple[str, ...],
    netns: str | None,
    tree: Path | None,
    state_dir: Path,
    fmt: str,
) -> int:
    """Differences between A and B (default: the live host).

    A and B are snapshot names, snapshot files (another host's) or sysctl.conf files.
    Exit 0 when equal, 3 when they differ.
    """
    manual = pairing.parse_map(maps)
    store = Store(state_dir)
    if b is None:
        host = make_host(netns, tree, read_only=True)
        name_a, values_a, host_a = load_side(a, store, scope_here(host))
        _same_namespace(name_a, host_a, host)
        only_snapshots = [k for k in values_a if k.startswith("ipv6/")]  # read them too
        name_b, values_b = host.label, apply.live_values(host, only_snapshots)
        roles_b = pairing.interface_roles(host, pairing.devices(values_b))
    else:
        name_a, values_a, host_a = load_side(a, store)
        name_b, values_b, host_b = load_side(b, store)
        roles_b = pairing.recorded_roles(host_b)
    paired = pairing.pair(
        values_a, values_b, a_roles=pairing.recorded_roles(host_a), b_roles=roles_b, manual=manual
    )
    a_to_b = {p.a: p.b for p in paired.pairs}
    # a sysctl.conf names only some keys: compare just those
    partial = a.endswith(".conf") or (b or "").endswith(".conf")
    diffs = diff(values_a, pairing.rename(values_b, paired.b_to_a()), only_common=partial)

    def b_key(key: str) -> str:
        dev = device_of(key)
        return with_device(key, a_to_b[dev]) if dev is not None and dev in a_to_b else key

    def table(p: Printer) -> None:
        for pr in paired.pairs:
            how = "--map" if pr.by == "map" else f"role {pr.role}; --map to change"
            p.echo(f"paired: {pr.a} in A with {pr.b} in B ({how})")
        for note in paired.notes:
            p.echo(f"not paired: {note}")
        _tables().differences(p.console, name_a, name_b, diffs)

    emit(
        env,
        {
            "a": name_a,
            "b": name_b,
            "pairs": [p.as_dict() for p in paired.pairs],
            "unpaired": paired.notes,
            "differences": [
                {
                    "key": d.key,
                    "b_key": b_key(d.key),
                    "group": group_of(d.key),
                    "unit": unit_of(d.key),
                    "a": typed(d.a),
                    "b": typed(d.b),
                }
                for d in diffs
            ],
        },
        fmt,
        table,
    )
    return int(ExitStatus.DRIFT if diffs else ExitStatus.OK)


@tune.command(name="restore")
@click.argument("snapshot", required=False)
@_host_options
@_state_option
@format_option
@click.option("--dry-run", is_flag=True, help="Print what would change; write nothing.")
@_unsafe_option
@_wait_option
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
    _same_namespace(snap.id, snap.host, host)
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
            lambda p: _tables().restore_plan(
                p.console, steps, skipped, missing, allow_unsafe=allow_unsafe
            ),
        )
        return 0
    with _state_errors(state_dir, "cannot take the lock"):
        out = apply.restore(
            host,
            snap,
            store,
            ctx,
            progress=_progress(for_people(env, fmt)),
            wait_s=wait_s,
            on_wait=_waiting(env),
            allow_unsafe=allow_unsafe,
        )
    emit(
        env,
        {"snapshot": snap.id, **out.as_dict()},
        fmt,
        lambda p: _tables().outcome(
            p.console, out, f"restore of {snap.id}", restore_hint(snap.id, scope, state_dir)
        ),
    )
    if out.ok and out.not_restored:
        return int(ExitStatus.DRIFT)  # the rest was put back; these still differ
    return _outcome_status(out)


@tune.command()
@click.argument("snapshot")
@_state_option
@format_option
@pass_env
def delete(env: Environment, snapshot: str, state_dir: Path, fmt: str) -> int:
    """Delete a snapshot."""
    snap_id = Store(state_dir).delete(snapshot)
    emit(
        env,
        {"deleted": snap_id},
        fmt,
        lambda p: _tables().whole(p.console, f"deleted snapshot {snap_id}"),
    )
    return 0


@tune.command()
@click.argument("name", required=False)
@click.option("--profile-dir", type=click.Path(path_type=Path), multiple=True)
@format_option
@pass_env
def profiles(env: Environment, name: str | None, profile_dir: tuple[Path, ...], fmt: str) -> int:
    """List profiles, or show one after includes are merged."""
    if name is None:
        names = shipped_names()

        def listing(p: Printer) -> None:
            for n in names:
                p.console.print(f"[bold]{n}[/]: {load_profile(n, profile_dir).description}")

        emit(env, names, fmt, listing, indent=None)
        return 0
    prof = _profile(name, profile_dir)
    emit(
        env,
        {
            "name": prof.name,
            "description": prof.description,
            "files": list(prof.files),
            "params": prof.params,
            "items": {
                k: {
                    "group": s.group,
                    "value": s.value,
                    "tiers": s.tiers,
                    "rule": s.rule,
                    "mode": s.mode,
                    "apply": s.apply,
                    "source": s.source,
                }
                for k, s in prof.items.items()
            },
        },
        fmt,
        lambda p: _tables().profile(p.console, prof),
    )
    return 0
