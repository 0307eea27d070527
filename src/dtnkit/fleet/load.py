"""Reading a directory of documents from many hosts, as if every file were hostile.

The files come from the playbooks or by mail from other sites, so each one is checked whole
before it is used, and a file that fails is skipped with one line naming it and why
(:class:`Skipped`); it never stops the others.  What is read from ``DIR``:

- ``*.audit.json``: the stdout of ``dtnkit tune audit --format json`` (schema
  ``dtnkit.audit/2``, or ``/1`` from an older dtnkit: its sysctl triples, text there, are
  read as the arrays of integers ``/2`` gives); the host is the file name before
  ``.audit.json``;
- ``*.experiment.json``: the stdout of ``dtnkit experiment --format json``;
- ``campaign.json``: the campaign playbook's record (schema ``dtnkit.campaign/1``).

Other files and subdirectories are left alone (counted).  A file is opened without following
a symbolic link (``O_NOFOLLOW``, relative to the directory's descriptor, so a link planted in
DIR that points elsewhere is skipped, not read), must be a regular file (a FIFO would block)
of at most :data:`MAX_FILE_BYTES`, UTF-8 JSON without a key given twice, NaN or Infinity,
nested at most 32 deep (dtnkit.tune.validation's reader), and of its schema's shape.
Names and text are kept as they are, except that a file name's undecodable bytes and every
control character become ``\\xNN`` (:func:`printable`), so no name can end a line or move a
terminal's cursor.
"""

from __future__ import annotations

import dataclasses
import math
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dtnkit.errors import BadInput
from dtnkit.tune.keys import typed  # schema 1's triples as schema 2's arrays
from dtnkit.tune.status import NOT_COMPLIANT, AuditStatus
from dtnkit.tune.validation import parse_json

AUDIT_SUFFIX = ".audit.json"
EXPERIMENT_SUFFIX = ".experiment.json"
CAMPAIGN_FILE = "campaign.json"
AUDIT_SCHEMA = "dtnkit.audit/2"
#: older audit schemas read too (1: sysctl triples as text)
AUDIT_SCHEMAS = (AUDIT_SCHEMA, "dtnkit.audit/1")
CAMPAIGN_SCHEMA = "dtnkit.campaign/1"
#: largest file read (a real audit is ~20 KiB, a campaign of 100 pairs ~200 KiB)
MAX_FILE_BYTES = 4 * 2**20
#: most documents read from one directory (past it, the directory is refused)
MAX_FILES = 10_000
VERDICTS = ("helps", "neutral", "harmful", "gated")
CAMPAIGN_STATUSES = ("done", "failed", "running")


def printable(text: str) -> str:
    """``text`` with undecodable bytes (a file name's surrogates) and every character Python
    does not call printable (controls, bidi overrides, unassigned, line separators) as
    ``\\xNN`` / ``\\uNNNN``: safe to print on one line of a terminal."""
    out = []
    for ch in text:
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:  # os.fsdecode's surrogateescape of a byte
            out.append(f"\\x{code - 0xDC00:02x}")
        elif not ch.isprintable():  # control, format, unassigned, separators but space
            out.append(
                f"\\x{code:02x}"
                if code < 0x100
                else f"\\u{code:04x}"
                if code < 0x10000
                else f"\\U{code:08x}"
            )
        else:
            out.append(ch)
    return "".join(out)


def clip(text: str, most: int = 120) -> str:
    return text if len(text) <= most else text[: most - 3] + "..."


@dataclasses.dataclass(frozen=True)
class Skipped:
    """A file not used, and why (one line)."""

    file: str
    why: str

    def line(self) -> str:
        return f"skipped {self.file}: {self.why}"


@dataclasses.dataclass(frozen=True)
class ReportedFinding:
    """One audited item as a host's audit document reports it (the fields a fleet report
    compares), not the live :class:`~dtnkit.tune.audit.Finding` that made it."""

    group: str
    key: str
    label: str
    scope: str
    device: str | None
    current: Any
    recommended: Any
    status: AuditStatus
    why: str


@dataclasses.dataclass(frozen=True)
class HostAudit:
    """One host's audit; ``name`` is its file's name before ``.audit.json``."""

    name: str
    file: str
    doc_host: str
    profile: str
    rtt_ms: float | None
    claimed_compliant: bool
    devices: tuple[str, ...]
    findings: tuple[ReportedFinding, ...]

    @property
    def compliant(self) -> bool:
        """Judged from the findings, as `tune audit` does (nothing differs or is unknown)."""
        return not any(f.status in NOT_COMPLIANT for f in self.findings)


@dataclasses.dataclass(frozen=True)
class GroupVerdict:
    """One group's result on one pair (a campaign) or one experiment."""

    group: str
    verdict: str
    applied: bool | None
    ratio: float | None
    margin: float | None
    baseline_bps: tuple[float, ...]
    applied_bps: tuple[float, ...]
    why: str


@dataclasses.dataclass(frozen=True)
class ReportedExperiment:
    name: str
    file: str
    id: str
    profile: str | None
    hosts: tuple[str, ...]
    probe: str | None
    groups: tuple[GroupVerdict, ...]


@dataclasses.dataclass(frozen=True)
class CampaignPair:
    client: str
    server: str
    nic_bps: float | None
    results: tuple[GroupVerdict, ...]

    @property
    def label(self) -> str:
        return f"{self.client} -> {self.server}"


@dataclasses.dataclass(frozen=True)
class Campaign:
    file: str
    profile: str | None
    groups: tuple[str, ...]
    started: float | None
    finished: float | None
    status: str
    failure: Mapping[str, str] | None
    pairs: tuple[CampaignPair, ...]
    restored: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Loaded:
    directory: Path
    audits: tuple[HostAudit, ...]
    experiments: tuple[ReportedExperiment, ...]
    campaign: Campaign | None
    skipped: tuple[Skipped, ...]
    ignored: int  # files and directories that are none of the three

    @property
    def usable(self) -> bool:
        return bool(self.audits or self.experiments or self.campaign)


# ---------------------------------------------------------------- shapes


class Invalid(ValueError):
    """A document that is not of its schema's shape: where, and what is wrong."""


def _show(value: Any) -> str:
    return clip(printable(repr(value)), 60)


class _Doc:
    """Typed access to one JSON object, naming the path of what is wrong."""

    def __init__(self, doc: Any, path: str) -> None:
        if not isinstance(doc, dict):
            raise Invalid(f"{path or 'the document'} is {_kind(doc)}, not an object")
        self.doc = doc
        self.path = path

    def _where(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def _get(self, key: str, ok: Callable[[Any], bool], want: str, required: bool) -> Any:
        if key not in self.doc:
            if required:
                raise Invalid(f"{self._where(key)} is missing")
            return None
        value = self.doc[key]
        if not ok(value):
            raise Invalid(f"{self._where(key)} is {_kind(value)} {_show(value)}, not {want}")
        return value

    def text(self, key: str, *, required: bool = True, null: bool = False) -> str | None:
        value = self._get(
            key,
            lambda v: isinstance(v, str) or (null and v is None),
            "a string" + (" or null" if null else ""),
            required,
        )
        return value if value is None else str(value)

    def name(self, key: str) -> str:
        """A non-empty string (a host, a group, a key)."""
        value = self.text(key)
        if not value:
            raise Invalid(f"{self._where(key)} is empty")
        return value

    def one_of(self, key: str, choices: Sequence[str]) -> str:
        value = self.text(key)
        if value not in choices:
            raise Invalid(f"{self._where(key)} is {_show(value)}, not one of {', '.join(choices)}")
        return str(value)

    def flag(self, key: str, *, required: bool = True) -> bool | None:
        value = self._get(key, lambda v: isinstance(v, bool), "true or false", required)
        return None if value is None else bool(value)

    def number(self, key: str, *, required: bool = False, null: bool = True) -> float | None:
        value = self._get(
            key,
            lambda v: _finite(v) or (null and v is None),
            "a finite number" + (" or null" if null else ""),
            required,
        )
        return None if value is None else float(value)

    def numbers(self, key: str) -> tuple[float, ...]:
        items = self.items(key, required=False)
        for i, v in enumerate(items):
            if not _finite(v):
                raise Invalid(
                    f"{self._where(key)}[{i}] is {_kind(v)} {_show(v)}, not a finite number"
                )
        return tuple(float(v) for v in items)

    def texts(self, key: str, *, required: bool = False) -> tuple[str, ...]:
        items = self.items(key, required=required)
        for i, v in enumerate(items):
            if not isinstance(v, str):
                raise Invalid(f"{self._where(key)}[{i}] is {_kind(v)}, not a string")
        return tuple(items)

    def items(self, key: str, *, required: bool = True) -> list[Any]:
        value = self._get(key, lambda v: isinstance(v, list), "a list", required)
        return [] if value is None else list(value)

    def objects(self, key: str, *, required: bool = True) -> list[_Doc]:
        return [
            _Doc(v, f"{self._where(key)}[{i}]")
            for i, v in enumerate(self.items(key, required=required))
        ]

    def object(self, key: str, *, required: bool = True, null: bool = False) -> _Doc | None:
        value = self._get(
            key,
            lambda v: isinstance(v, dict) or (null and v is None),
            "an object" + (" or null" if null else ""),
            required,
        )
        return None if value is None else _Doc(value, self._where(key))


def _finite(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:  # an integer past a float's range
        return False


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "an object",
    }.get(type(value), type(value).__name__)


def _error_doc(doc: Any) -> None:
    """The JSON a dtnkit command prints when it fails: say so instead of a shape error."""
    if isinstance(doc, dict) and isinstance(doc.get("error"), dict) and len(doc) == 1:
        what = doc["error"].get("what")
        raise Invalid(
            "it is an error report, not a result: the command failed there"
            + (f" ({clip(printable(what), 80)})" if isinstance(what, str) else "")
        )


def _schema(d: _Doc, want: str, *older: str) -> None:
    got = d.doc.get("schema")
    if got != want and got not in older:
        raise Invalid(
            f"schema is {_show(got)}, not {want!r}"
            if "schema" in d.doc
            else f"no schema (want {want!r})"
        )


def audit_from(doc: Any, name: str, file: str) -> HostAudit:
    """A ``dtnkit tune audit --format json`` document, checked."""
    _error_doc(doc)
    d = _Doc(doc, "")
    _schema(d, *AUDIT_SCHEMAS)
    findings = []
    for f in d.objects("findings"):
        findings.append(
            ReportedFinding(
                group=f.name("group"),
                key=f.name("key"),
                label=f.text("label", required=False) or "",
                scope=f.text("scope", required=False) or "",
                device=f.text("device", required=False, null=True),
                current=typed(f.doc.get("current")),
                recommended=typed(f.doc.get("recommended")),
                status=AuditStatus(f.one_of("status", list(AuditStatus))),
                why=f.text("why", required=False) or "",
            )
        )
    devices = []
    for i in d.objects("interfaces", required=False):
        dev = i.text("device", required=False)
        if dev:
            devices.append(dev)
    compliant = d.flag("compliant")
    return HostAudit(
        name=name,
        file=file,
        doc_host=str(d.text("host")),
        profile=d.name("profile"),
        rtt_ms=d.number("rtt_ms"),
        claimed_compliant=bool(compliant),
        devices=tuple(devices),
        findings=tuple(findings),
    )


def _verdict(r: _Doc) -> GroupVerdict:
    return GroupVerdict(
        group=r.name("group"),
        verdict=r.one_of("verdict", VERDICTS),
        applied=r.flag("applied", required=False),
        ratio=r.number("ratio"),
        margin=r.number("margin"),
        baseline_bps=r.numbers("baseline_bps"),
        applied_bps=r.numbers("applied_bps"),
        why=r.text("why", required=False) or "",
    )


def experiment_from(doc: Any, name: str, file: str) -> ReportedExperiment:
    """A ``dtnkit experiment --format json`` document, checked."""
    _error_doc(doc)
    d = _Doc(doc, "")
    spec = d.object("spec")
    assert spec is not None
    return ReportedExperiment(
        name=name,
        file=file,
        id=d.name("id"),
        profile=spec.text("profile", required=False),
        hosts=spec.texts("hosts"),
        probe=spec.text("probe", required=False),
        groups=tuple(_verdict(g) for g in d.objects("groups")),
    )


def campaign_from(doc: Any, file: str) -> Campaign:
    """The campaign playbook's ``campaign.json``, checked."""
    _error_doc(doc)
    d = _Doc(doc, "")
    _schema(d, CAMPAIGN_SCHEMA)
    failure = d.object("failure", required=False, null=True)
    fail: dict[str, str] | None = None
    if failure is not None:
        fail = {k: str(failure.text(k, required=False) or "") for k in ("host", "step", "msg")}
    pairs = tuple(
        CampaignPair(
            client=p.name("client"),
            server=p.name("server"),
            nic_bps=p.number("nic_bps"),
            results=tuple(_verdict(r) for r in p.objects("results")),
        )
        for p in d.objects("pairs")
    )
    return Campaign(
        file=file,
        profile=d.text("profile", required=False),
        groups=d.texts("groups"),
        started=d.number("started"),
        finished=d.number("finished"),
        status=d.one_of("status", CAMPAIGN_STATUSES),
        failure=fail,
        pairs=pairs,
        restored=d.texts("restored"),
    )


# ---------------------------------------------------------------- the directory


def _read(dirfd: int, name: str) -> bytes:
    """A regular file's bytes, opened relative to the directory without following a link."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dirfd)
    except OSError as exc:
        if exc.errno == 40:  # ELOOP: the name is a symbolic link
            raise Invalid(
                "it is a symbolic link: not followed (copy the file itself into the directory)"
            ) from None
        raise Invalid(f"cannot open it: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Invalid("it is not a regular file")
        if st.st_size > MAX_FILE_BYTES:
            raise Invalid(f"it is too large: {st.st_size} bytes, at most {MAX_FILE_BYTES}")
        chunks, got = [], 0
        while got <= MAX_FILE_BYTES:  # it may grow while read: never past the cap
            chunk = os.read(fd, min(1 << 20, MAX_FILE_BYTES + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        if got > MAX_FILE_BYTES:
            raise Invalid(f"it is too large: more than {MAX_FILE_BYTES} bytes")
        return b"".join(chunks)
    except OSError as exc:
        raise Invalid(f"cannot read it: {exc.strerror}") from None
    finally:
        os.close(fd)


def parse(data: bytes) -> Any:
    """Strict JSON (dtnkit.tune.validation's reader), or Invalid saying why."""
    if not data.strip():
        raise Invalid("it is empty")
    try:
        return parse_json(data, "it")
    except BadInput as exc:
        raise Invalid(f"{exc.what}: {exc.why}" if exc.why else exc.what) from None


def kind_of(name: str) -> str | None:
    """Which document a file name holds: audit, experiment, campaign, or None."""
    if name == CAMPAIGN_FILE:
        return "campaign"
    for suffix, kind in ((AUDIT_SUFFIX, "audit"), (EXPERIMENT_SUFFIX, "experiment")):
        if name.endswith(suffix):
            return kind
    return None


def load_dir(directory: Path) -> Loaded:
    """Every document in ``directory`` that passes its checks; the others as skipped.
    A directory that cannot be read is BadInput (nothing to report)."""
    shown_dir = printable(str(directory))
    try:
        dirfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        why = "it is not a directory" if exc.errno == 20 else exc.strerror or str(exc)
        raise BadInput(
            f"cannot read {shown_dir}",
            why,
            "give the directory the site audit wrote (DIR/HOST.audit.json)",
        ) from None
    try:
        try:
            names = sorted(os.listdir(dirfd))
        except OSError as exc:
            raise BadInput(
                f"cannot list {shown_dir}",
                exc.strerror or str(exc),
                "check the directory's permissions",
            ) from None
        wanted = [n for n in names if kind_of(n)]
        if len(wanted) > MAX_FILES:
            raise BadInput(
                f"{shown_dir} holds {len(wanted)} documents",
                f"at most {MAX_FILES} are read",
                "split it into several reports",
            )
        audits: dict[str, HostAudit] = {}
        experiments: dict[str, ReportedExperiment] = {}
        campaign: Campaign | None = None
        skipped: list[Skipped] = []
        for raw in wanted:
            kind = kind_of(raw)
            file = printable(raw)
            try:
                if kind == "audit":
                    name = printable(raw[: -len(AUDIT_SUFFIX)])
                    if not name:
                        raise Invalid("no host name before .audit.json")
                    if name in audits:  # two raw names printed alike
                        raise Invalid(f"host {name} is read from {audits[name].file} already")
                    audits[name] = audit_from(parse(_read(dirfd, raw)), name, file)
                elif kind == "experiment":
                    name = printable(raw[: -len(EXPERIMENT_SUFFIX)])
                    if not name:
                        raise Invalid("no name before .experiment.json")
                    if name in experiments:
                        raise Invalid(f"{name} is read from {experiments[name].file} already")
                    experiments[name] = experiment_from(parse(_read(dirfd, raw)), name, file)
                else:
                    campaign = campaign_from(parse(_read(dirfd, raw)), file)
            except Invalid as exc:
                skipped.append(Skipped(file, printable(str(exc))))
        return Loaded(
            directory=directory,
            audits=tuple(audits.values()),
            experiments=tuple(experiments.values()),
            campaign=campaign,
            skipped=tuple(skipped),
            ignored=len(names) - len(wanted),
        )
    finally:
        os.close(dirfd)
