"""ethtool's kernel interface, sans I/O: the requests ``ethtool -g``, ``-k``, ``-c``, ``-a``
and ``-i`` make, and parsers of the kernel's replies into what :mod:`.ethtool` reads from
their output (Rings, features, Coalesce, Pause, the ``-i`` rows).

Each ethtool run is a process start (5-10 ms on a loaded host) for microseconds of kernel
work, so a live Host asks the kernel itself
(:meth:`dtnkit.host.kernel.KernelView.ethtool_replies`: one generic-netlink socket in this
process, or in a namespace's helper process) and a captured tree replays ethtool's output as
before.  ethtool 6.1 reads rings, features,
coalescing and pause through the ``ethtool`` generic-netlink family and the driver through
the ``SIOCETHTOOL`` ioctl (``ETHTOOL_GDRVINFO``); the decoding here follows its printing
(``netlink/rings.c``, ``features.c``, ``coalesce.c``, ``pause.c``, ``ethtool.c``
``dump_drvinfo``): an attribute the kernel leaves out is ``n/a``, a feature group of several
kernel features is shown as one legacy name, and so on, so both paths give the same values;
``tests/host/test_ethtool_netlink.py`` compares them on real devices.

Formats (``include/uapi/linux/genetlink.h``, ``ethtool_netlink.h``, ``ethtool.h``): after
the netlink header (:mod:`.netlink`), a 4-byte ``genlmsghdr`` (command,
version), then attributes, in host byte order.  An error reply is ``NLMSG_ERROR`` with a
negative errno (:class:`~.netlink.KernelRefused`).
"""

from __future__ import annotations

from dtnkit.host.parsers import ParseError
from dtnkit.host.parsers.ethtool import Coalesce, Feature, Pause, Rings
from dtnkit.host.parsers.netlink import (
    NLM_F_REQUEST,
    attr,
    attributes,
    message,
    nest,
    reply_body,
    u32,
    uint,
)

GENL_ID_CTRL = 0x10
_CTRL_CMD_GETFAMILY, _CTRL_ATTR_FAMILY_ID, _CTRL_ATTR_FAMILY_NAME = 3, 1, 2
_ETHTOOL_GENL_VERSION = 1
_HEADER_DEV_NAME, _HEADER_FLAGS = 2, 3
_FLAG_COMPACT_BITSETS = 1
_ETH_SS_FEATURES = 4
EOPNOTSUPP, ENODEV = 95, 19

#: the reads of one device: name -> (ethtool's flag, request command, reply command)
READS: dict[str, tuple[str, int, int]] = {
    "strset": ("", 1, 1),  # ETHTOOL_MSG_STRSET_GET: the feature names (global)
    "features": ("-k", 11, 11),
    "rings": ("-g", 15, 16),
    "coalesce": ("-c", 19, 20),
    "pause": ("-a", 21, 22),
}
FLAG_READS = {flag: name for name, (flag, _, _) in READS.items() if flag}

ETHTOOL_GDRVINFO = 0x3
DRVINFO_SIZE = 196  # struct ethtool_drvinfo


def _message(family: int, seq: int, cmd: int, attrs: bytes) -> bytes:
    header = bytes([cmd, _ETHTOOL_GENL_VERSION, 0, 0])  # genlmsghdr (the controller's is 1 too)
    return message(family, NLM_F_REQUEST, seq, header + attrs)


def family_request(seq: int = 1) -> bytes:
    """Ask the generic-netlink controller for the ``ethtool`` family's id."""
    return _message(
        GENL_ID_CTRL, seq, _CTRL_CMD_GETFAMILY, attr(_CTRL_ATTR_FAMILY_NAME, b"ethtool\0")
    )


def parse_family(reply: bytes) -> int:
    """The family id from the controller's reply (ParseError when it has none: a kernel
    without the ethtool netlink interface, older than 5.6)."""
    body = reply_body(reply, "genetlink family")
    family = attributes(body[4:]).get(_CTRL_ATTR_FAMILY_ID)
    if family is None or len(family) != 2:
        raise ParseError("genetlink family: no ethtool family id in the reply")
    return uint(family)


def device_requests(family: int, device: str, first_seq: int = 1) -> list[bytes]:
    """The requests of :data:`READS` for ``device``, in that order (sequence numbers from
    ``first_seq``).  ParseError when the name cannot be a device's."""
    name = device.encode()
    if not name or len(name) > 15 or b"\0" in name or b"/" in name:
        raise ParseError(f"ethtool netlink: {device!r} is not a device name")
    out = []
    for seq, (read, (_, cmd, _)) in enumerate(READS.items(), start=first_seq):
        header = attr(_HEADER_DEV_NAME, name + b"\0")
        if read == "strset":
            sets = nest(2, nest(1, attr(1, u32(_ETH_SS_FEATURES))))
            out.append(_message(family, seq, cmd, nest(1, header) + sets))
            continue
        if read == "features":
            header += attr(_HEADER_FLAGS, u32(_FLAG_COMPACT_BITSETS))
        out.append(_message(family, seq, cmd, nest(1, header)))
    return out


def _attrs(reply: bytes, what: str, cmd: int | None = None) -> dict[int, bytes]:
    body = reply_body(reply, what)
    if cmd is not None and body[0] != cmd:
        raise ParseError(f"{what}: reply command {body[0]}, expected {cmd}")
    return attributes(body[4:], what)


def _u32_attr(attrs: dict[int, bytes], kind: int, what: str) -> int | None:
    value = attrs.get(kind)
    if value is None:
        return None
    if len(value) != 4:
        raise ParseError(f"{what}: attribute {kind} is {len(value)} bytes, not 4")
    return uint(value)


def _bool_attr(attrs: dict[int, bytes], kind: int, what: str) -> bool | None:
    value = attrs.get(kind)
    if value is None:
        return None
    if len(value) != 1:
        raise ParseError(f"{what}: attribute {kind} is {len(value)} bytes, not 1")
    return bool(value[0])


# --------------------------------------------------------------------------- rings (-g)


def parse_rings(reply: bytes) -> Rings:
    """ETHTOOL_MSG_RINGS_GET_REPLY: the kernel leaves out a ring whose maximum is 0 (ethtool
    prints ``n/a``)."""
    what = "ethtool netlink rings"
    a = _attrs(reply, what, READS["rings"][2])
    get = [_u32_attr(a, kind, what) for kind in range(2, 10)]
    return Rings(
        rx_max=get[0],
        rx_mini_max=get[1],
        rx_jumbo_max=get[2],
        tx_max=get[3],
        rx=get[4],
        rx_mini=get[5],
        rx_jumbo=get[6],
        tx=get[7],
    )


# --------------------------------------------------------------------------- pause (-a)


def parse_pause(reply: bytes) -> Pause:
    what = "ethtool netlink pause"
    a = _attrs(reply, what, READS["pause"][2])
    pause = Pause(
        autoneg=_bool_attr(a, 2, what), rx=_bool_attr(a, 3, what), tx=_bool_attr(a, 4, what)
    )
    if pause.autoneg is None and pause.rx is None and pause.tx is None:
        raise ParseError(f"{what}: none of autonegotiate, rx, tx in the reply")
    return pause


# --------------------------------------------------------------------------- coalesce (-c)

# The rows ethtool 6.1 prints (netlink/coalesce.c), in its order: name -> attribute.
_COALESCE_ROWS = (
    ("stats-block-usecs", 10),
    ("sample-interval", 23),
    ("pkt-rate-low", 13),
    ("pkt-rate-high", 18),
    ("rx-usecs", 2),
    ("rx-frames", 3),
    ("rx-usecs-irq", 4),
    ("rx-frames-irq", 5),
    ("tx-usecs", 6),
    ("tx-frames", 7),
    ("tx-usecs-irq", 8),
    ("tx-frames-irq", 9),
    ("rx-usecs-low", 14),
    ("rx-frame-low", 15),
    ("tx-usecs-low", 16),
    ("tx-frame-low", 17),
    ("rx-usecs-high", 19),
    ("rx-frame-high", 20),
    ("tx-usecs-high", 21),
    ("tx-frame-high", 22),
)


def _on_off_na(value: bool | None) -> str:
    return "n/a" if value is None else ("on" if value else "off")


def parse_coalesce(reply: bytes) -> Coalesce:
    """ETHTOOL_MSG_COALESCE_GET_REPLY: the kernel sends only what the driver supports;
    ethtool prints ``n/a`` for the rest (as the text parser keeps it)."""
    what = "ethtool netlink coalesce"
    a = _attrs(reply, what, READS["coalesce"][2])
    values: dict[str, int | str] = {}
    for name, kind in _COALESCE_ROWS:
        value = _u32_attr(a, kind, what)
        values[name] = "n/a" if value is None else value
    values["CQE mode RX"] = _on_off_na(_bool_attr(a, 25, what))
    values["CQE mode TX"] = _on_off_na(_bool_attr(a, 24, what))
    return Coalesce(
        adaptive_rx=_bool_attr(a, 11, what), adaptive_tx=_bool_attr(a, 12, what), values=values
    )


# --------------------------------------------------------------------------- features (-k)


def parse_feature_names(reply: bytes) -> list[str]:
    """ETHTOOL_MSG_STRSET_GET_REPLY for ETH_SS_FEATURES: the names by bit index ("" where
    the kernel gives none)."""
    what = "ethtool netlink strings"
    sets = attributes(_attrs(reply, what, READS["strset"][2]).get(2, b""))
    one = attributes(sets.get(1, b""))
    count = _u32_attr(one, 2, what)
    if count is None or count > 4096 or _u32_attr(one, 1, what) != _ETH_SS_FEATURES:
        raise ParseError(f"{what}: no feature string set in the reply")
    names = [""] * count
    strings = one.get(3, b"")
    pos = 0
    while pos + 4 <= len(strings):
        length = uint(strings[pos : pos + 2])
        if length < 4 or pos + length > len(strings):
            raise ParseError(f"{what}: truncated string at byte {pos}")
        entry = attributes(strings[pos + 4 : pos + length])
        index = _u32_attr(entry, 1, what)
        value = entry.get(2)
        if index is None or value is None or index >= count:
            raise ParseError(f"{what}: a string without index or value")
        names[index] = value.split(b"\0", 1)[0].decode(errors="replace")
        pos += (length + 3) & ~3
    return names


def _bitset(data: bytes | None, what: str) -> tuple[int, int]:
    """A compact bitset: (size in bits, value as one integer)."""
    if data is None:
        raise ParseError(f"{what}: a feature bitset is missing")
    a = attributes(data)
    size = _u32_attr(a, 2, what)
    value = a.get(4)
    if size is None or value is None or len(value) != 4 * ((size + 31) // 32):
        raise ParseError(f"{what}: a feature bitset without size or value")
    words = [uint(value[i : i + 4]) for i in range(0, len(value), 4)]
    return size, sum(word << (32 * i) for i, word in enumerate(words))


# ethtool's legacy flags (common.c off_flag_def): long name, kernel name pattern (at most one
# '*'); udp-fragmentation-offload is skipped ("no kernel with netlink interface supports UFO")
_LEGACY = (
    ("rx-checksumming", "rx-checksum"),
    ("tx-checksumming", "tx-checksum-*"),
    ("scatter-gather", "tx-scatter-gather*"),
    ("tcp-segmentation-offload", "tx-tcp*-segmentation"),
    ("generic-segmentation-offload", "tx-generic-segmentation"),
    ("generic-receive-offload", "rx-gro"),
    ("large-receive-offload", "rx-lro"),
    ("rx-vlan-offload", "rx-vlan-hw-parse"),
    ("tx-vlan-offload", "tx-vlan-hw-insert"),
    ("ntuple-filters", "rx-ntuple-filter"),
    ("receive-hashing", "rx-hashing"),
)
# udp-fragmentation-offload's pattern still claims its feature (it is then shown nowhere)
_UFO_PATTERN = "tx-udp-fragmentation"
_PATTERNS = (*(p for _, p in _LEGACY[:4]), _UFO_PATTERN, *(p for _, p in _LEGACY[4:]))


def _pattern_match(name: str, pattern: str) -> bool:
    head, star, tail = pattern.partition("*")
    if not star:
        return name == pattern
    return len(name) + 1 >= len(pattern) and name.startswith(head) and name.endswith(tail)


def parse_features(reply: bytes, names: list[str]) -> dict[str, Feature]:
    """ETHTOOL_MSG_FEATURES_GET_REPLY (compact bitsets) with the feature names, as
    ``ethtool --json -k`` shows them (netlink/features.c ``dump_features``): a legacy flag
    matched by one kernel feature under the legacy name; one matched by several (or none) as
    the legacy name (on if any is, fixed and requested unknown) followed by each feature."""
    what = "ethtool netlink features"
    a = _attrs(reply, what, READS["features"][2])
    sizes, (hw, wanted, active, nochange) = zip(
        *(_bitset(a.get(kind), what) for kind in (2, 3, 4, 5)), strict=True
    )
    count = sizes[0]
    if any(size != count for size in sizes):
        raise ParseError(f"{what}: the bitsets differ in size")

    def on(bits: int, i: int) -> bool:
        return bool(bits >> i & 1)

    def feature(i: int, name: str) -> Feature:
        fixed = not on(hw, i) or on(nochange, i)
        return Feature(name=name, on=on(active, i), fixed=fixed, requested=on(wanted, i))

    flags: list[int | None] = []
    for i in range(count):
        name = names[i] if i < len(names) else ""
        flags.append(
            next((j for j, p in enumerate(_PATTERNS) if name and _pattern_match(name, p)), None)
        )
    out: dict[str, Feature] = {}
    for j, pattern in enumerate(_PATTERNS):
        if pattern == _UFO_PATTERN:
            continue
        long = _LEGACY[j if j < 4 else j - 1][0]
        matched = [i for i in range(count) if flags[i] == j]
        if len(matched) != 1:
            out[long] = Feature(
                name=long, on=any(on(active, i) for i in matched), fixed=False, requested=None
            )
        for i in matched:
            if len(matched) == 1:
                out[long] = feature(i, long)
            elif names[i]:
                out[names[i]] = feature(i, names[i])
    for i in range(count):
        name = names[i] if i < len(names) else ""
        if name and flags[i] is None:
            out[name] = feature(i, name)
    return out


# --------------------------------------------------------------------------- driver (-i)


def drvinfo_request() -> bytes:
    """The ``struct ethtool_drvinfo`` buffer the ioctl fills (its command set)."""
    return u32(ETHTOOL_GDRVINFO) + bytes(DRVINFO_SIZE - 4)


def parse_drvinfo(data: bytes) -> dict[str, str]:
    """The filled ``struct ethtool_drvinfo`` as the rows ``ethtool -i`` prints
    (:func:`dtnkit.host.parsers.ethtool.parse_ethtool_driver`'s keys and values)."""
    if not isinstance(data, bytes) or len(data) != DRVINFO_SIZE:
        raise ParseError(
            f"ethtool drvinfo: {len(data) if isinstance(data, bytes) else 0} "
            f"bytes, not {DRVINFO_SIZE}"
        )

    def text(start: int) -> str:
        return data[start : start + 32].split(b"\0", 1)[0].decode(errors="replace").strip()

    counts = [uint(data[176 + 4 * i : 180 + 4 * i]) for i in range(5)]
    n_priv, n_stats, testinfo, eedump, regdump = counts
    yes = {True: "yes", False: "no"}
    info = {
        "driver": text(4),
        "version": text(36),
        "firmware-version": text(68),
        "expansion-rom-version": text(132),
        "bus-info": text(100),
        "supports-statistics": yes[n_stats > 0],
        "supports-test": yes[testinfo > 0],
        "supports-eeprom-access": yes[eedump > 0],
        "supports-register-dump": yes[regdump > 0],
        "supports-priv-flags": yes[n_priv > 0],
    }
    if not info["driver"]:
        raise ParseError("ethtool drvinfo: no driver name")
    return info
