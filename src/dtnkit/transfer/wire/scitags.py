"""SciTags, sans I/O: the transfer tag, the registry's JSON, the IPv6 flow label and the
firefly datagram (https://www.scitags.org).

- The tag of a transfer is ``expId << 6 | actId`` (the ``SciTag`` HTTP header, FTS
  ``--scitag``, XRootD's ``scitag.flow``): experiment 1-1023, activity 1-63, so 65-65535.
- The registry (``api.json``) names experiments and activities:
  ``{"experiments": [{"expName", "expId", "activities": [{"activityName", "activityId"}]}],
  "version": 1, "modified": ISO time}``; :func:`parse_registry` checks it strictly.
- The IPv6 flow label carries 15 bits of meaning and 5 of entropy, as flowd, flowd-go and
  sFlow-RT lay them out: bits 19-18 entropy, 17-9 the experiment bit-reversed (9 bits), 8
  entropy, 7-2 the activity, 1-0 entropy.
- A firefly is one UDP datagram: an RFC 5424 syslog header (``<134>1 TIME HOST dtnkit -
  firefly-json -``) and the firefly JSON of schema v1.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass

#: The header clients send, and the one forwarded to the passive party of a third-party copy
#: (``TransferHeaderSciTag``, as gfal2, FTS, dCache and StoRM use it).
HEADER = "SciTag"
MAX_EXPERIMENT = 1023
MAX_ACTIVITY = 63
MIN_TAG = (1 << 6) | 1
MAX_TAG = (MAX_EXPERIMENT << 6) | MAX_ACTIVITY
#: Experiments that fit the flow label's 9 bits.
MAX_LABEL_EXPERIMENT = 511
#: UDP port fireflies go to (flowd, flowd-go, XRootD, dCache).
FIREFLY_PORT = 10514
#: Largest registry accepted (the published one is ~6 KB).
MAX_REGISTRY = 4 * 2**20
#: Longest experiment or activity name accepted from a registry.
MAX_NAME = 128


def tag(experiment: int, activity: int) -> int:
    """The transfer tag of *experiment* and *activity*; ValueError outside their ranges."""
    if not 1 <= experiment <= MAX_EXPERIMENT:
        raise ValueError(f"experiment id {experiment} is outside 1-{MAX_EXPERIMENT}")
    if not 1 <= activity <= MAX_ACTIVITY:
        raise ValueError(f"activity id {activity} is outside 1-{MAX_ACTIVITY}")
    return experiment << 6 | activity


def split(value: int) -> tuple[int, int]:
    """(experiment, activity) of a tag; ValueError when it is not a valid tag."""
    if not MIN_TAG <= value <= MAX_TAG:
        raise ValueError(f"{value} is outside {MIN_TAG}-{MAX_TAG}")
    experiment, activity = value >> 6, value & MAX_ACTIVITY
    if experiment < 1 or activity < 1:
        raise ValueError(
            f"{value} has experiment {experiment}, activity {activity} (both must be at least 1)"
        )
    return experiment, activity


def parse_tag(text: str) -> int:
    """A tag as written on a command line or in a header: ASCII digits only (no sign, no
    space inside, at most 5 digits); ValueError otherwise."""
    text = text.strip()
    if not text or len(text) > 5 or not text.isascii() or not text.isdigit():
        raise ValueError(f"{text[:40]!r} is not a number from {MIN_TAG} to {MAX_TAG}")
    value = int(text)
    split(value)
    return value


def header_tag(values: list[str]) -> int | None:
    """The tag of a request's ``SciTag`` header(s): None when absent; ValueError when
    malformed, out of range or given more than once (the server ignores it and counts)."""
    if not values:
        return None
    if len(values) > 1:
        raise ValueError(f"{len(values)} SciTag headers")
    return parse_tag(values[0])


# --- the registry ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Experiment:
    name: str
    id: int
    activities: dict[str, int]  # name -> id, names as published


@dataclass(frozen=True)
class Registry:
    """Experiments and activities with their ids; where they came from and when."""

    experiments: tuple[Experiment, ...]
    modified: str | None  # the registry's own "modified" time
    source: str  # a file, a URL, or the snapshot shipped with dtnkit

    def experiment(self, name: str) -> Experiment:
        """The experiment named *name* (case-insensitive) or with that id; KeyError."""
        key = name.strip().lower()
        for exp in self.experiments:
            if exp.name.lower() == key or (key.isdigit() and int(key) == exp.id):
                return exp
        raise KeyError(name)

    def resolve(self, experiment: str, activity: str) -> int:
        """The tag of *experiment* and *activity* (names, case-insensitive, or ids);
        KeyError naming what is unknown and what is known."""
        try:
            exp = self.experiment(experiment)
        except KeyError:
            known = ", ".join(e.name for e in self.experiments)
            raise KeyError(
                f"experiment {experiment[:80]!r} is not in the registry (known: {known})"
            ) from None
        key = activity.strip().lower()
        for name, act_id in exp.activities.items():
            if name.lower() == key or (key.isdigit() and int(key) == act_id):
                return tag(exp.id, act_id)
        known = ", ".join(exp.activities)
        raise KeyError(f"activity {activity[:80]!r} is not one of {exp.name}'s ({known})")

    def names(self, value: int) -> tuple[str | None, str | None]:
        """Experiment and activity names of a tag (None where the registry has none)."""
        exp_id, act_id = value >> 6, value & MAX_ACTIVITY
        for exp in self.experiments:
            if exp.id == exp_id:
                act = next((n for n, i in exp.activities.items() if i == act_id), None)
                return exp.name, act
        return None, None


def _int(value: object, what: str, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= hi:
        raise ValueError(f"{what} must be an integer from 1 to {hi}, not {value!r:.40}")
    return value


def _name(value: object, what: str) -> str:
    if (
        not isinstance(value, str)
        or not value.strip()
        or len(value) > MAX_NAME
        or not value.isprintable()
    ):
        raise ValueError(
            f"{what} must be a printable name of 1-{MAX_NAME} characters, not {value!r:.60}"
        )
    return value


def parse_registry(data: bytes, source: str) -> Registry:
    """The registry in *data* (the JSON of scitags.org's ``api.json``), checked strictly:
    every experiment and activity has a name and an id in range, no id or name (ignoring
    case) twice; ValueError saying what is wrong."""
    if len(data) > MAX_REGISTRY:
        raise ValueError(f"larger than {MAX_REGISTRY} bytes")
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ValueError(f"not JSON ({str(exc)[:120]})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("experiments"), list):
        raise ValueError('not a registry (no "experiments" list)')
    version = doc.get("version", 1)
    if version != 1 or isinstance(version, bool):
        raise ValueError(f"registry version {version!r:.20} (dtnkit reads version 1)")
    modified = doc.get("modified")
    if modified is not None and not (
        isinstance(modified, str) and len(modified) <= 64 and modified.isprintable()
    ):
        raise ValueError('"modified" must be a time string')
    experiments: list[Experiment] = []
    seen_ids: set[int] = set()
    seen_names: set[str] = set()
    for i, item in enumerate(doc["experiments"]):
        if not isinstance(item, dict):
            raise ValueError(f"experiment #{i + 1} is not an object")
        name = _name(item.get("expName"), f"experiment #{i + 1} expName")
        exp_id = _int(item.get("expId"), f"experiment {name!r} expId", MAX_EXPERIMENT)
        if exp_id in seen_ids or name.lower() in seen_names:
            raise ValueError(f"experiment {name!r} (id {exp_id}) is listed twice")
        seen_ids.add(exp_id)
        seen_names.add(name.lower())
        acts = item.get("activities")
        if not isinstance(acts, list) or not acts:
            raise ValueError(f"experiment {name!r} has no activities list")
        activities: dict[str, int] = {}
        act_ids: set[int] = set()
        for j, act in enumerate(acts):
            if not isinstance(act, dict):
                raise ValueError(f"activity #{j + 1} of {name!r} is not an object")
            act_name = _name(act.get("activityName"), f"activity #{j + 1} of {name!r}")
            act_id = _int(act.get("activityId"), f"activity {act_name!r} of {name!r}", MAX_ACTIVITY)
            if act_id in act_ids or act_name.lower() in {a.lower() for a in activities}:
                raise ValueError(f"activity {act_name!r} (id {act_id}) of {name!r} is listed twice")
            act_ids.add(act_id)
            activities[act_name] = act_id
        experiments.append(Experiment(name, exp_id, activities))
    if not experiments:
        raise ValueError("no experiments")
    return Registry(tuple(experiments), modified, source)


# --- the IPv6 flow label --------------------------------------------------------------------


def reverse9(value: int) -> int:
    """The 9 low bits of *value* in reverse order."""
    return int(f"{value & 0x1FF:09b}"[::-1], 2)


def flow_label(value: int, entropy: int) -> int:
    """The 20-bit IPv6 flow label of tag *value* with 5 bits of *entropy*; ValueError for a
    tag whose experiment does not fit the label's 9 bits."""
    experiment, activity = split(value)
    if experiment > MAX_LABEL_EXPERIMENT:
        raise ValueError(
            f"experiment {experiment} does not fit the flow label (at most {MAX_LABEL_EXPERIMENT})"
        )
    e = entropy & 0x1F
    return (
        (e >> 3) << 18 | reverse9(experiment) << 9 | ((e >> 2) & 1) << 8 | activity << 2 | (e & 3)
    )


def label_tag(label: int) -> tuple[int, int]:
    """(experiment, activity) a flow label carries, its entropy bits ignored."""
    return reverse9(label >> 9), (label >> 2) & MAX_ACTIVITY


# --- fireflies ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Flow:
    """One TCP connection as a firefly names it: src is this host, dst the peer."""

    src_ip: str
    src_port: int
    dst_ip: str
    dst_port: int

    @property
    def afi(self) -> str:
        return "ipv6" if ":" in self.src_ip else "ipv4"


def iso(epoch: float) -> str:
    """*epoch* as the UTC time fireflies carry: ``2021-09-07T22:22:21.998202+00:00``."""
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).isoformat(timespec="microseconds")


def firefly(
    state: str,
    flow: Flow,
    value: int,
    *,
    start: float,
    end: float | None = None,
    received: int | None = None,
    sent: int | None = None,
    application: str = "dtnkit",
) -> dict[str, object]:
    """The firefly JSON (schema v1) of *flow* tagged *value*, in *state* (start|end)."""
    experiment, activity = value >> 6, value & MAX_ACTIVITY
    lifecycle: dict[str, object] = {"state": state, "start-time": iso(start)}
    if end is not None:
        lifecycle["end-time"] = iso(end)
        lifecycle["current-time"] = iso(end)
    else:
        lifecycle["current-time"] = iso(start)
    doc: dict[str, object] = {
        "version": 1,
        "flow-lifecycle": lifecycle,
        "flow-id": {
            "afi": flow.afi,
            "src-ip": flow.src_ip,
            "dst-ip": flow.dst_ip,
            "protocol": "tcp",
            "src-port": flow.src_port,
            "dst-port": flow.dst_port,
        },
        "context": {
            "experiment-id": experiment,
            "activity-id": activity,
            "application": application,
        },
    }
    if received is not None or sent is not None:
        doc["usage"] = {"received": received or 0, "sent": sent or 0}
    return doc


def datagram(doc: dict[str, object], hostname: str, now: float) -> bytes:
    """The UDP payload: RFC 5424 header (PRI 134 = local0.info) and the JSON."""
    host = "".join(c for c in hostname if "!" <= c <= "~")[:255] or "-"
    head = f"<134>1 {iso(now)} {host} dtnkit - firefly-json - "
    return head.encode("ascii") + json.dumps(doc, separators=(",", ":")).encode("ascii")
