"""Pure parsers behind ``dtnkit checklist``: text in, facts out, no I/O.

What a site's hosts say about themselves: ``ping`` replies and errors, ``ip -j route get``,
``getent ahosts``, process command lines (``/proc/PID/cmdline``), XRootD ``xrootd.pmark``
lines, dCache's ``pool.enable.firefly``, flowd / flowd-go, softflowd and pmacct configuration.
Every function takes any text (a captured file may hold anything) and never raises on it; a
``--peer`` or ``--perfsonar`` value that is not what it should be raises :class:`BadInput`.
"""

from __future__ import annotations

import ipaddress
import json
import re
import urllib.parse
from dataclasses import dataclass, field

from dtnkit.errors import BadInput

# ---- --peer -------------------------------------------------------------------------------------

_LABEL = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")
_ZONE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,14}$")


@dataclass(frozen=True)
class PeerAddress:
    """A ``--peer`` value: an IP literal (``family`` 4 or 6) or a host name (``family`` None)."""

    text: str  # as given (brackets removed)
    family: int | None

    @property
    def literal(self) -> bool:
        return self.family is not None


def parse_peer(text: str) -> PeerAddress:
    """A host name or an IP literal (``[v6]`` and ``fe80::1%eth0`` accepted); anything else is
    bad input: a peer is put on command lines (ping, getent), so nothing that could read as an
    option or hold a blank passes."""
    raw = text.strip()
    hint = "give a host name (dtn2.example.org) or an IP address (192.0.2.7, 2001:db8::7)"
    if not raw:
        raise BadInput("--peer is empty", "", hint)
    if len(raw) > 253 or any(c.isspace() or not c.isprintable() for c in raw):
        raise BadInput(
            f"bad --peer {text[:60]!r}", "too long, or holds blanks or control characters", hint
        )
    if raw.startswith("[") and raw.endswith("]"):
        raw = raw[1:-1]
    if raw.startswith("-"):
        raise BadInput(f"bad --peer {raw!r}", "it starts with '-'", hint)
    addr, _, zone = raw.partition("%")
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        ip = None
    if ip is not None:
        if zone and (ip.version != 6 or not _ZONE.match(zone)):
            raise BadInput(f"bad --peer {raw!r}", "a zone (%IF) is an IPv6 interface name", hint)
        if ip.is_unspecified or ip.is_multicast:
            raise BadInput(f"bad --peer {raw!r}", "not the address of one host", hint)
        return PeerAddress(str(ip) + (f"%{zone}" if zone else ""), ip.version)
    if ":" in raw:
        why = (
            "a port is not needed: give the host only"
            if raw.count(":") == 1
            else "not an IPv6 address"
        )
        raise BadInput(f"bad --peer {raw!r}", why, hint)
    name = raw[:-1] if raw.endswith(".") else raw
    labels = name.split(".")
    if not name or not all(_LABEL.match(label) for label in labels):
        raise BadInput(
            f"bad --peer {raw!r}",
            "not an IP address nor a host name (letters, digits and '-' between dots)",
            hint,
        )
    if labels[-1].isdigit():
        raise BadInput(
            f"bad --peer {raw!r}",
            "not an IP address, and a host name does not end in a number",
            hint,
        )
    return PeerAddress(raw, None)


def parse_getent_hosts(text: str) -> list[str]:
    """The addresses ``getent ahosts NAME`` printed, in order, each once (IPv4-mapped IPv6
    addresses as the IPv4 address)."""
    out: list[str] = []
    for line in text.splitlines():
        first = line.split(maxsplit=1)[0] if line.split() else ""
        try:
            ip = ipaddress.ip_address(first)
        except ValueError:
            continue
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if str(ip) not in out:
            out.append(str(ip))
    return out


def check_url(text: str, what: str = "--perfsonar") -> str:
    """An http(s) URL with a host, no blanks or control characters; else bad input."""
    hint = "give the toolkit's address, e.g. https://ps.example.org"
    if (
        not text
        or len(text) > 2048
        or text.startswith("-")
        or any(c.isspace() or not c.isprintable() for c in text)
    ):
        raise BadInput(f"bad {what} {text[:60]!r}", "empty, too long, or holds blanks", hint)
    try:
        url = urllib.parse.urlsplit(text)
        url.port  # noqa: B018 -- raises on a bad port
    except ValueError as exc:
        raise BadInput(f"bad {what} {text[:60]!r}", str(exc), hint) from exc
    if url.scheme not in ("http", "https") or not url.hostname:
        raise BadInput(
            f"bad {what} {text[:60]!r}", "not an http:// or https:// URL with a host", hint
        )
    return text


# ---- ping and routes ----------------------------------------------------------------------------

_MTU_HINT = re.compile(r"\bmtu\s*=\s*(\d{2,6})\b", re.IGNORECASE)


@dataclass(frozen=True)
class PingOutcome:
    replied: bool
    mtu_hint: int | None  # what ping's error said of the path MTU ("mtu=1400")
    note: str  # the line that says what happened, shortened


def parse_ping(returncode: int, text: str) -> PingOutcome:
    """One ``ping -c N -M do -s SIZE`` run: whether it got a reply, and the MTU its error
    named (a router's "Frag needed", the kernel's "message too long, mtu=N")."""
    replied = returncode == 0 and bool(re.search(r"\b[1-9][0-9]* (packets )?received\b", text))
    hint = None
    m = _MTU_HINT.search(text)
    if m is not None and 68 <= int(m.group(1)) <= 65535:
        hint = int(m.group(1))
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    note = "reply" if replied else "no reply"
    for words in (
        (
            "too long",
            "frag",
            "too big",
            "unreachable",
            "unknown host",
            "not known",
            "invalid",
            "cannot",
            "denied",
            "not installed",
            "no buffer space",
        ),
        ("error",),
    ):
        found = [ln for ln in lines if any(w in ln.lower() for w in words)]
        if found:
            note = found[0][:120]
            break
    return PingOutcome(replied, hint, note)


@dataclass(frozen=True)
class RouteTo:
    dev: str | None
    pmtu: int | None  # the kernel's cached path MTU to that address, when it holds one
    kind: str  # "unicast", "local", "unreachable", ...


def parse_route_get(text: str) -> RouteTo | None:
    """``ip -j route get ADDR``: the device, and an ``mtu`` of the route cache; None when the
    output is not that."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, list) or not data or not isinstance(data[0], dict):
        return None
    route = data[0]
    dev = route.get("dev")
    mtu = route.get("mtu")
    metrics = route.get("metrics")
    if mtu is None and isinstance(metrics, list):
        for m in metrics:
            if isinstance(m, dict) and "mtu" in m:
                mtu = m["mtu"]
    kind = route.get("type", "unicast")
    return RouteTo(
        dev if isinstance(dev, str) else None,
        mtu if isinstance(mtu, int) and not isinstance(mtu, bool) and mtu > 0 else None,
        kind if isinstance(kind, str) else "unicast",
    )


# ---- processes ----------------------------------------------------------------------------------


def cmdline_argv(raw: str) -> list[str]:
    """``/proc/PID/cmdline`` (NUL-separated) as a list; empty for a kernel thread."""
    return [a for a in raw.split("\0") if a] if raw else []


def _base(arg: str) -> str:
    return arg.rsplit("/", 1)[-1]


def program(argv: list[str]) -> tuple[str, list[str]]:
    """The program an argv runs and its arguments, looking through interpreters
    (``python3 -m dtnkit``, ``python3 /usr/bin/flowd``) and ``ip netns exec NS``."""
    args = list(argv)
    while args:
        name = _base(args[0])
        if name == "ip" and args[1:3] == ["netns", "exec"] and len(args) > 4:
            args = args[4:]
            continue
        if re.fullmatch(r"python[0-9.]*", name):
            rest = args[1:]
            while rest and rest[0].startswith("-") and rest[0] != "-m":
                rest = rest[1:]
            if rest[:1] == ["-m"] and len(rest) > 1:
                return rest[1].split(".")[0], rest[2:]
            if rest:
                return _base(rest[0]), rest[1:]
            return name, []
        return name, args[1:]
    return "", []


def option_value(args: list[str], *names: str) -> str | None:
    """The value of the first of ``names`` in ``args`` (``-c X``, ``--flag=X``)."""
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                return args[i + 1]
            if name.startswith("--") and arg.startswith(name + "="):
                return arg[len(name) + 1 :]
    return None


# ---- SciTags: XRootD, dCache, flowd -------------------------------------------------------------


@dataclass
class Pmark:
    """What the ``xrootd.pmark`` lines of one XRootD configuration set."""

    lines: list[str] = field(default_factory=list)
    ffdest: list[str] = field(default_factory=list)
    firefly: bool | None = None  # `use firefly` / `use nofirefly`; None: not said
    flowlabel: bool | None = None
    defsfile: bool = False
    maps: bool = False

    @property
    def fireflies_on(self) -> bool:
        """As XRootD decides it: fireflies go out once a destination is given, unless
        `use nofirefly`; `use firefly` alone has nowhere to send to but the client
        (`ffdest origin` is the way to say that)."""
        return self.firefly is not False and bool(self.ffdest)

    @property
    def problems(self) -> list[str]:
        out = []
        if self.lines and not self.fireflies_on:
            out.append(
                "firefly disabled; configuration incomplete (no ffdest)"
                if self.firefly is not False
                else "use nofirefly"
            )
        if self.maps and not self.defsfile:
            out.append("map2exp/map2act without defsfile (XRootD refuses to start)")
        return out


_CONTINUED = re.compile(r"\\\s*$")


def parse_xrootd_pmark(text: str) -> Pmark:
    """The ``xrootd.pmark`` directives of an XRootD config file (comments and other directives
    skipped; a line ending in a backslash continues)."""
    out = Pmark()
    logical: list[str] = []
    buf = ""
    for line in text.splitlines():
        if _CONTINUED.search(line):
            buf += _CONTINUED.sub(" ", line)
            continue
        logical.append(buf + line)
        buf = ""
    if buf:
        logical.append(buf)
    for line in logical:
        words = line.split("#", 1)[0].split()
        if not words or words[0] != "xrootd.pmark":
            continue
        out.lines.append(" ".join(words)[:200])
        args = words[1:]
        i = 0
        while i < len(args):
            word = args[i]
            nxt = args[i + 1] if i + 1 < len(args) else ""
            if word == "ffdest" and nxt:
                out.ffdest.extend(d for d in nxt.split(",") if d)
                i += 1
            elif word == "use" and nxt:
                for opt in nxt.split(","):
                    if opt in ("firefly", "flowlabel+ff"):
                        out.firefly = True
                    elif opt == "nofirefly":
                        out.firefly = False
                    if opt in ("flowlabel", "flowlabel+ff"):
                        out.flowlabel = True
                    elif opt == "noflowlabel":
                        out.flowlabel = False
                i += 1
            elif word == "defsfile":
                out.defsfile = True
            elif word in ("map2exp", "map2act"):
                out.maps = True
            i += 1
    return out


def xrootd_includes(text: str) -> list[str]:
    """Files an XRootD config pulls in with ``continue PATH`` (a directory: its files)."""
    out = []
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        if len(words) >= 2 and words[0] == "continue" and words[1].startswith("/"):
            out.append(words[1])
    return out


def properties(text: str) -> dict[str, str]:
    """``key = value`` lines (dCache's dcache.conf and layouts; ``#`` comments); the last one
    of a key wins, as in dCache."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "[")) or "=" not in line:
            continue
        key, _, value = line.partition("=")
        out[key.strip()] = value.strip()
    return out


def dcache_firefly(text: str) -> bool | None:
    """``pool.enable.firefly``: True / False as set, None when the file does not set it."""
    value = properties(text).get("pool.enable.firefly")
    return None if value is None else value.lower() == "true"


def uncommented(text: str) -> list[str]:
    """The lines that are not blank and not ``#`` comments, stripped."""
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]


def flowd_go_backends(text: str) -> list[str]:
    """The backends an (uncommented) flowd-go ``conf.yaml`` turns on: the keys under a
    top-level ``backends:`` (a flat reading: YAML's indentation, no library)."""
    out: list[str] = []
    inside = False
    indent: int | None = None
    for line in text.splitlines():
        body = line.split("#", 1)[0].rstrip()
        if not body.strip():
            continue
        depth = len(body) - len(body.lstrip())
        if depth == 0:
            inside = body.strip().rstrip(":").strip() == "backends" and body.strip().endswith(":")
            indent = None
            continue
        if inside:
            if indent is None:
                indent = depth
            if depth == indent and body.strip().endswith(":"):
                out.append(body.strip()[:-1].strip())
    return out


def flowd_cfg(text: str) -> dict[str, str]:
    """flowd's ``/etc/flowd/flowd.cfg``: Python-style ``KEY = 'value'`` lines."""
    out: dict[str, str] = {}
    for line in uncommented(text):
        key, sep, value = line.partition("=")
        if sep and re.fullmatch(r"[A-Z_][A-Z0-9_]*", key.strip()):
            out[key.strip()] = value.strip().strip("'\"")
    return out


# ---- flow export: softflowd, pmacct -------------------------------------------------------------


def softflowd_export(text: str) -> str | None:
    """Where a softflowd config exports to: Debian's /etc/default/softflowd
    (``INTERFACE=`` and ``OPTIONS="-n host:port"``) or /etc/softflowd/*.conf
    (``interface=`` and ``options=``); None when no interface is set."""
    values = {k.lower(): v.strip().strip("'\"") for k, v in properties(text).items()}
    iface = values.get("interface", "")
    if not iface:
        return None
    options = values.get("options", "")
    m = re.search(r"-n\s*(\S+)", options)
    return f"{iface} -> {m.group(1)}" if m else iface


def pmacct_export(text: str) -> list[str]:
    """The exporting plugins (``nfprobe``, ``sfprobe``) a pmacct config's ``plugins:`` line
    turns on, with their collector when ``nfprobe_receiver``/``sfprobe_receiver`` says."""
    plugins: list[str] = []
    receivers: dict[str, str] = {}
    for line in uncommented(text):
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip().split("[")[0]
        if key == "plugins":
            plugins = [p.strip().split("[")[0] for p in value.split(",") if p.strip()]
        elif key in ("nfprobe_receiver", "sfprobe_receiver"):
            receivers[key.split("_")[0]] = value.strip()
    return [
        p + (f" -> {receivers[p]}" if p in receivers else "")
        for p in plugins
        if p in ("nfprobe", "sfprobe")
    ]
