"""Snapshots: versioned JSON documents of every restorable setting, written atomically.

A snapshot's ``values`` map flat keys (``sysctl/net.core.rmem_max``, ``qdisc/eth0/root``) to
exact values, so restore replays them through the same tunables that read them.  ``files``
records the content dtnkit's persist files had before (``null``: absent), so restore can put
them back.
"""

from __future__ import annotations

import datetime as dt
import errno
import hashlib
import json
import os
import re
import socket
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dtnkit.atomicfile import replace_file
from dtnkit.errors import BadInput, DtnkitError, ExitStatus
from dtnkit.host.facts import Unavailable
from dtnkit.host.host import Host
from dtnkit.host.parsers import ParseError
from dtnkit.host.parsers.sysctl import parse_sysctl_conf
from dtnkit.tune.context import Context
from dtnkit.tune.keys import as_kept, typed
from dtnkit.tune.kinds.base import Scope, Tunable
from dtnkit.tune.kinds.ipv6 import IPV6_MIN_MTU
from dtnkit.tune.pairing import devices, format_roles, interface_roles
from dtnkit.tune.registry import KINDS, accept_snapshot_key, prepare_scopes, tunable_for_key
from dtnkit.tune.validation import check_snapshot, decode_text, parse_json

#: 2: sysctl triples (tcp_rmem, tcp_wmem, tcp_mem) are arrays of integers, not strings
SCHEMA = "dtnkit.snapshot/2"
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

# Order in which kinds of settings are written (and the reverse for undo): the registry's.
KIND_ORDER = tuple(KINDS)


@dataclass
class Snapshot:
    id: str
    label: str
    kind: str  # manual | baseline
    created: str
    host: dict[str, Any]
    values: dict[str, Any]
    files: dict[str, str | None] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "id": self.id,
            "label": self.label,
            "kind": self.kind,
            "created": self.created,
            "host": self.host,
            "values": {key: typed(value) for key, value in self.values.items()},
            "files": self.files,
        }

    @classmethod
    def from_dict(cls, doc: Any, origin: str) -> Snapshot:
        if not isinstance(doc, dict):
            raise BadInput(
                f"{origin} is not a dtnkit snapshot",
                "it is not a JSON object",
                "give a file written by `dtnkit tune save`",
            )
        doc = migrate(doc)
        schema = doc.get("schema")
        if schema != SCHEMA:
            raise BadInput(
                f"{origin} has snapshot schema {schema!r}",
                f"this dtnkit reads {SCHEMA} and {', '.join(MIGRATIONS)}",
                "use the dtnkit version that wrote it, or save a new snapshot",
            )
        if isinstance(doc.get("values"), dict):  # as the tunables keep them (triples as text)
            doc = {**doc, "values": {k: as_kept(k, v) for k, v in doc["values"].items()}}
        check_snapshot(doc, origin)  # every field, every value by its kind: before any use
        snap = cls(
            id=doc["id"],
            label=doc.get("label", ""),
            kind=doc["kind"],
            created=doc["created"],
            host=dict(doc.get("host", {})),
            values=dict(doc["values"]),
            files=dict(doc.get("files", {})),
        )
        _accept_keys(snap.values, origin)
        return snap


def _triples_as_arrays(doc: dict[str, Any]) -> dict[str, Any]:
    """Schema 1 -> 2: a sysctl value of integers given as text (``"4096 131072 6291456"``)
    becomes an array of integers; nothing else changes."""
    values = doc.get("values")
    if isinstance(values, dict):
        values = {k: typed(v) if k.startswith("sysctl/") else v for k, v in values.items()}
    return {**doc, "schema": "dtnkit.snapshot/2", "values": values}


#: the older schemas read, each with the step that makes its document the next schema's
MIGRATIONS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "dtnkit.snapshot/1": _triples_as_arrays,
}


def migrate(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` in this dtnkit's schema when it is in an older one it knows (one step each)."""
    seen = set()
    while isinstance(doc.get("schema"), str) and doc["schema"] in MIGRATIONS:
        if doc["schema"] in seen:  # a step that gave its own schema back: stop
            break
        seen.add(doc["schema"])
        doc = MIGRATIONS[doc["schema"]](doc)
    return doc


HOST_SCOPE = "host"


def scope_of(facts: dict[str, Any]) -> str:
    """Where a snapshot was taken, as the commands name it: ``host`` (the root namespace),
    ``netns NAME`` (a named namespace, by its first name), ``netns-id DEV:INODE`` (a namespace
    with no name: ``unshare --net``, a container) or ``tree PATH``.  Each scope has its own
    last baseline.  A snapshot records it as ``host.scope``; older ones say it by
    ``netns`` and ``root``."""
    root = facts.get("root") or "/"
    if root != "/":
        return f"tree {root}"
    recorded = facts.get("scope")
    if isinstance(recorded, str) and recorded:
        return recorded
    return f"netns {facts['netns']}" if facts.get("netns") else HOST_SCOPE


def scope_options(scope: str) -> str:
    """The options that select ``scope`` on the command line (empty for the host, and for a
    namespace with no name, which only a process inside it reaches)."""
    kind, _, name = scope.partition(" ")
    return f"--{kind} {name}" if kind in ("netns", "tree") else ""


def describe_scope(scope: str) -> str:
    """``scope`` in a sentence: "the host namespace", "netns lab1", "an unnamed network
    namespace (id 4:4026532000)"."""
    kind, _, name = scope.partition(" ")
    if scope == HOST_SCOPE:
        return "the host namespace"
    if kind == "netns-id":
        return f"an unnamed network namespace (id {name})"
    return scope


def _accept_keys(values: dict[str, Any], origin: str) -> None:
    """Every key must be claimed by a kind and be in a known group (scope: see registry); a
    key only a snapshot holds (the IPv6 state an MTU below 1280 drops) must go with the
    setting that drops it: the same interface's MTU, at 1280 or more."""
    for key in values:
        tunable = accept_snapshot_key(key, origin)
        if not tunable.snapshot_only:
            continue
        mtu_key = f"link/{tunable.device}/mtu"
        mtu = values.get(mtu_key)
        if not isinstance(mtu, int) or isinstance(mtu, bool) or mtu < IPV6_MIN_MTU:
            raise BadInput(
                f"{origin} holds {key} without {mtu_key} at {IPV6_MIN_MTU} or more",
                "a snapshot holds an interface's IPv6 state only beside that interface's MTU "
                f"from before an MTU below {IPV6_MIN_MTU} took it off"
                + (f" (its MTU there is {mtu})" if mtu is not None else ""),
                "remove the key, or restore from another snapshot",
            )


def capture(host: Host, ctx: Context, tunables: Sequence[Tunable]) -> dict[str, Any]:
    """Current values of every restorable tunable that this host (or namespace) lets us set."""
    values: dict[str, Any] = {}
    if not ctx.env.initial_netns:
        prepare_scopes(host, tunables)
    for tunable in tunables:
        if not tunable.restorable:
            continue
        if not ctx.env.initial_netns and tunable.scope_on(host)[0] is Scope.HOST:
            continue
        value = tunable.read(host)
        if not isinstance(value, Unavailable):
            values[tunable.key] = value
    return dict(sorted(values.items(), key=lambda kv: _order(kv[0])))


def _order(key: str) -> tuple[int, str]:
    kind = key.split("/", 1)[0]
    return (KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER), key)


def sort_keys(keys: Sequence[str]) -> list[str]:
    return sorted(keys, key=_order)


def netns_identity(host: Host) -> str | None:
    """``DEV:INODE`` of the network namespace a live host works in (``/run/netns/NAME`` for
    --netns, else this process's own), as the apply lock keys it; None for a tree."""
    if not host.is_live:
        return None
    return _identity(f"/run/netns/{host.netns}" if host.netns else "/proc/self/ns/net")


def _identity(path: str) -> str | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return f"{st.st_dev}:{st.st_ino}"


def root_identity() -> str | None:
    """The identity of the host's own (PID 1's) network namespace."""
    return _identity("/proc/1/ns/net")


def netns_named(identity: str | None) -> str | None:
    """The ``ip netns`` name of the namespace with this identity, if it has one."""
    if identity is None:
        return None
    try:
        names = sorted(p.name for p in Path("/run/netns").iterdir())
    except OSError:
        return None
    return next(
        (n for n in names if _ID.match(n) and _identity(f"/run/netns/{n}") == identity), None
    )


def scope_here(host: Host) -> str:
    """The scope a command works in, by the identity of the namespace it works in, however
    that was entered: ``--netns NS``, a process under ``ip netns exec NS``, or another name
    of the same namespace all give ``netns`` and the namespace's first name (sorted); the
    root namespace is ``host`` whatever names it; a namespace without a name (``unshare
    --net``, a container's) is ``netns-id DEV:INODE``.  A tree is ``tree PATH``."""
    if not host.is_live:
        return host.label
    identity = netns_identity(host)
    if identity is None:
        return host.label
    if identity == root_identity():
        return HOST_SCOPE
    name = netns_named(identity)
    return f"netns {name}" if name is not None else f"netns-id {identity}"


def new_snapshot(host: Host, values: dict[str, Any], label: str, kind: str) -> Snapshot:
    now = dt.datetime.now(dt.UTC)
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-")[:40] or kind
    facts = {
        "hostname": socket.gethostname(),
        "netns": host.netns,
        "root": str(host.root),
        "kernel": (host.read("/proc/sys/kernel/osrelease") or "").strip(),
    }
    identity = netns_identity(host)
    if identity is not None:  # restore compares it: `ip netns exec NS dtnkit` is seen too
        facts["netns_id"] = identity
        scope = scope_here(host)
        facts["scope"] = scope
        # the namespace's first name, however it was entered (None: the host's, or none)
        facts["netns"] = scope.removeprefix("netns ") if scope.startswith("netns ") else None
    try:  # each device's role, so `tune diff` can pair another host's NICs with these
        roles = interface_roles(host, devices(values))
    except DtnkitError:
        roles = {}
    if roles:
        facts["interfaces"] = format_roles(roles)
    return Snapshot(
        id=f"{now:%Y%m%dT%H%M%S}Z-{slug}",
        label=label,
        kind=kind,
        created=now.isoformat(timespec="seconds"),
        host=facts,
        values=values,
    )


class Store:
    """Snapshots in a directory, one JSON file each, plus a pointer to the last baseline."""

    def __init__(self, state_dir: Path) -> None:
        self.dir = state_dir / "snapshots"
        self.state_dir = state_dir

    def _path(self, snap_id: str) -> Path:
        if not _ID.match(snap_id):
            raise BadInput(
                f"bad snapshot name {snap_id!r}",
                "names are letters, digits, '.', '_' and '-'",
                "see `dtnkit tune list`",
            )
        return self.dir / f"{snap_id}.json"

    def save(self, snap: Snapshot) -> Path:
        with state_io(self.state_dir, "cannot save snapshot"):
            self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            base = snap.id
            n = 1
            while self._path(snap.id).exists():
                n += 1
                snap.id = f"{base}-{n}"
            path = self._path(snap.id)
            _atomic_write(path, json.dumps(snap.as_dict(), indent=2, sort_keys=False) + "\n")
        return path

    def ids(self) -> list[str]:
        with state_io(self.state_dir, "cannot list snapshots"):
            # the state dir, or the nearest of its parents that exists, is a plain file
            found = next(p for p in (self.state_dir, *self.state_dir.parents) if p.exists())
            if not found.is_dir():
                raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(found))
            if not self.dir.is_dir():
                return []
            return sorted(
                p.stem
                for p in self.dir.iterdir()
                if p.suffix == ".json" and not p.name.startswith(".")
            )

    def load(self, name: str, scope: str = HOST_SCOPE) -> Snapshot:
        snap_id = self.resolve(name, scope)
        path = self._path(snap_id)
        return load_file(path)

    def resolve(self, name: str, scope: str = HOST_SCOPE) -> str:
        """An exact id, a unique prefix or label, or ``last`` for the last baseline of
        ``scope``."""
        if name in ("last", "baseline"):
            last = self.last_baseline(scope)
            if last is None:
                opts = scope_options(scope)
                others = self._netns_with_baseline()
                raise BadInput(
                    f"no baseline has been saved yet for {scope}",
                    f"`dtnkit tune apply{' ' + opts if opts else ''}` saves one "
                    "before its first write"
                    + (f"; there is one for {', '.join(others)}" if others else ""),
                    (f"give {scope_options(others[0])}, or " if others else "give ")
                    + "a snapshot name (see `dtnkit tune list`)",
                )
            return last
        self._path(name)  # validates the characters
        ids = self.ids()
        if name in ids:
            return name
        matches = [i for i in ids if i.startswith(name) or i.endswith(f"-{name}")]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise BadInput(
                f"no snapshot {name!r}",
                f"{len(ids)} snapshots in {self.dir}",
                "see `dtnkit tune list`",
            )
        raise BadInput(
            f"snapshot name {name!r} is ambiguous",
            f"it matches {', '.join(matches)}",
            "give more of the name",
        )

    def delete(self, name: str) -> str:
        snap_id = self.resolve(name)
        try:
            scope = scope_of(self.load(snap_id).host)
        except BadInput:  # a damaged snapshot is the last baseline of no scope
            scope = None
        with state_io(self.state_dir, f"cannot delete snapshot {snap_id}"):
            last = self.last_baseline(scope) if scope is not None else None
            self._path(snap_id).unlink()
            if scope is not None and last == snap_id:
                self._pointer(scope).unlink(missing_ok=True)
        return snap_id

    def _pointer(self, scope: str) -> Path:
        """The file naming ``scope``'s last baseline: ``last-baseline`` for the host (as it
        always was), ``last-baseline.netns-NAME`` for a namespace (names are [A-Za-z0-9._-]),
        ``last-baseline.tree-HASH`` for a captured tree (its path hashed)."""
        if scope == HOST_SCOPE:
            return self.state_dir / "last-baseline"
        kind, _, name = scope.partition(" ")
        if kind == "netns" and _ID.match(name):
            return self.state_dir / f"last-baseline.netns-{name}"
        digest = hashlib.sha256(scope.encode()).hexdigest()[:16]
        return self.state_dir / f"last-baseline.{kind}-{digest}"

    def _netns_with_baseline(self) -> list[str]:
        """The namespaces (``netns NAME``) that have a last baseline here."""
        try:
            names = sorted(
                p.name.removeprefix("last-baseline.netns-")
                for p in self.state_dir.glob("last-baseline.netns-*")
            )
        except OSError:
            return []
        return [f"netns {n}" for n in names if self.last_baseline(f"netns {n}")]

    def last_baseline(self, scope: str = HOST_SCOPE) -> str | None:
        pointer = self._pointer(scope)
        ids = self.ids()  # refuses a state dir that is a plain file
        with state_io(self.state_dir, "cannot read the last baseline"):
            if not pointer.is_file():
                return None
            snap_id = decode_text(pointer.read_bytes(), str(pointer), "delete it").strip()
        return snap_id if snap_id in ids else None

    def set_last_baseline(self, snap_id: str, scope: str = HOST_SCOPE) -> None:
        with state_io(self.state_dir, "cannot record the last baseline"):
            self.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            _atomic_write(self._pointer(scope), snap_id + "\n")

    # ---- an apply that has not finished ---------------------------------------------------
    # ``unfinished-apply[.SUFFIX]`` (the suffix of the scope's last-baseline file) names the
    # baseline of an apply from before its first write until it ends: done, or undone to the
    # baseline.  Still there when the next apply takes the lock, that apply was killed (or
    # its undo failed) and the host is half-tuned: the next apply's snapshot is kept but is
    # not the baseline of record, which stays the one taken before the first write.
    def _unfinished_path(self, scope: str) -> Path:
        name = self._pointer(scope).name.replace("last-baseline", "unfinished-apply", 1)
        return self.state_dir / name

    def unfinished_apply(self, scope: str = HOST_SCOPE) -> str | None:
        """The baseline of ``scope``'s apply that did not finish, if any."""
        path = self._unfinished_path(scope)
        ids = self.ids()
        with state_io(self.state_dir, "cannot read the unfinished-apply mark"):
            if not path.is_file():
                return None
            snap_id = decode_text(path.read_bytes(), str(path), "delete it").strip()
        return snap_id if snap_id in ids else None

    def mark_unfinished(self, snap_id: str, scope: str = HOST_SCOPE) -> None:
        with state_io(self.state_dir, "cannot mark the apply as running"):
            _atomic_write(self._unfinished_path(scope), snap_id + "\n")

    def clear_unfinished(self, scope: str = HOST_SCOPE) -> None:
        with state_io(self.state_dir, "cannot clear the unfinished-apply mark"):
            self._unfinished_path(scope).unlink(missing_ok=True)


@contextmanager
def state_io(state_dir: Path, what: str) -> Iterator[None]:
    """An OSError on the state directory becomes one error line (exit 9 when the path given
    is not a directory, 1 when it is read-only, full or unreadable)."""
    try:
        yield
    except OSError as exc:
        raise state_dir_error(state_dir, what, exc) from exc


def state_dir_error(state_dir: Path, what: str, exc: OSError) -> DtnkitError:
    where = f" ({exc.filename})" if exc.filename else ""
    why = f"{exc.strerror or exc}{where}"
    if exc.errno in (errno.ENOTDIR, errno.EEXIST):
        return BadInput(
            f"{what} in {state_dir}", why, "give a directory with --state-dir or $DTNKIT_STATE_DIR"
        )
    return DtnkitError(
        f"{what} in {state_dir}",
        why,
        "free space or make it writable, or give another --state-dir",
        status=ExitStatus.ERROR,
    )


def load_file(path: Path) -> Snapshot:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise BadInput(
            f"cannot read snapshot {path}",
            exc.strerror or str(exc),
            "check the name with `dtnkit tune list`",
        ) from exc
    origin = f"snapshot {path}"
    return Snapshot.from_dict(parse_json(data, origin), origin)


def load_values(source: str, store: Store) -> tuple[str, dict[str, Any]]:
    """Values from a snapshot name, a snapshot file, or a sysctl.conf-style file."""
    name, values, _host = load_side(source, store)
    return name, values


def load_side(
    source: str, store: Store, scope: str = HOST_SCOPE
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """A side of a diff: its name, its values and its ``host`` facts (none for a sysctl
    file); ``last`` is ``scope``'s last baseline."""
    path = Path(source)
    if "/" in source or path.suffix in (".json", ".conf"):
        if not path.is_file():
            raise BadInput(f"{source} does not exist", "", "give a snapshot name or a file path")
        try:
            text = path.read_text(errors="replace")
        except OSError as exc:
            raise BadInput(
                f"cannot read {source}",
                exc.strerror or str(exc),
                "give a snapshot name or a file path",
            ) from exc
        if text.lstrip().startswith("{"):
            snap = load_file(path)
            return snap.id, snap.values, snap.host
        try:
            conf = parse_sysctl_conf(text)
        except ParseError as exc:
            raise BadInput(
                f"{source} is neither a snapshot nor a sysctl file",
                str(exc),
                "give a snapshot JSON or a sysctl.conf",
            ) from exc
        return str(path), {f"sysctl/{k}": v for k, v in conf.items()}, {}
    snap = store.load(source, scope)
    return snap.id, snap.values, snap.host


@dataclass(frozen=True)
class Difference:
    key: str
    a: Any
    b: Any


def diff(a: dict[str, Any], b: dict[str, Any], *, only_common: bool = False) -> list[Difference]:
    """Pure: keys whose values differ (sysctl whitespace normalised); missing keys as None."""
    keys = set(a) & set(b) if only_common else set(a) | set(b)
    out: list[Difference] = []
    for key in sort_keys(list(keys)):
        va, vb = a.get(key), b.get(key)
        if va is not None and vb is not None:
            tunable = tunable_for_key(key)
            if tunable.satisfies(va, vb, "exact") and (
                not tunable.snapshot_only or tunable.satisfies(vb, va, "exact")
            ):
                continue  # (a kind only snapshots hold is a set: equal both ways)
        elif va is None and vb is None:
            continue
        out.append(Difference(key, va, vb))
    return out


def _atomic_write(path: Path, text: str) -> None:
    replace_file(path, text, mode=0o600)  # the owner's alone, as they always were
