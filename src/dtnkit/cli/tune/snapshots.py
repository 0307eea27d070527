"""`dtnkit tune save`, `list`, `show`, `diff` and `delete`: the snapshots of settings, and how
one compares with another or with the live host."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from dtnkit.cli.hosts import host_options, make_host
from dtnkit.cli.options import CliCommand, pass_env
from dtnkit.cli.output import Printer, emit, format_option
from dtnkit.cli.render import whole
from dtnkit.cli.tune import tables
from dtnkit.cli.tune.options import state_option
from dtnkit.environment import Environment
from dtnkit.errors import BadInput, ExitStatus
from dtnkit.host.host import Host
from dtnkit.tune import apply, pairing
from dtnkit.tune.keys import device_of, group_of, typed, unit_of, with_device
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
)


@click.command(cls=CliCommand)
@click.option("--label", default="manual", show_default=True)
@host_options
@state_option
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
        lambda p: tables.saved(p.console, snap, path),
        indent=None,
    )
    return 0


@click.command("list", cls=CliCommand)
@state_option
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
    emit(env, rows, fmt, lambda p: tables.snapshot_list(p.console, rows, store.dir))
    return 0


def same_namespace(name: str, facts: dict[str, Any], host: Host) -> None:
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


@click.command(cls=CliCommand)
@click.argument("snapshot")
@state_option
@format_option
@pass_env
def show(env: Environment, snapshot: str, state_dir: Path, fmt: str) -> int:
    """Show one snapshot (a name, unique prefix, label, or `last`)."""
    snap = Store(state_dir).load(snapshot)
    emit(env, snap.as_dict(), fmt, lambda p: tables.snapshot(p.console, snap))
    return 0


@click.command("diff", cls=CliCommand)
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
@host_options
@state_option
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
        same_namespace(name_a, host_a, host)
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
        tables.differences(p.console, name_a, name_b, diffs)

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


@click.command(cls=CliCommand)
@click.argument("snapshot")
@state_option
@format_option
@pass_env
def delete(env: Environment, snapshot: str, state_dir: Path, fmt: str) -> int:
    """Delete a snapshot."""
    snap_id = Store(state_dir).delete(snapshot)
    emit(
        env,
        {"deleted": snap_id},
        fmt,
        lambda p: whole(p.console, f"deleted snapshot {snap_id}"),
    )
    return 0
