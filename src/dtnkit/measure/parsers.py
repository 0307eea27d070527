"""Parsers for what the sampler reads: /proc/stat, /proc/net/{snmp,netstat,dev} and ``ss -tinO``.

Pure functions: text in, dicts out; :class:`~dtnkit.host.parsers.ParseError` on text that fits
no known form.  The formats, as printed by Linux 6.x and iproute2 6.1 (checked against the real
captures under ``tests/fixtures/measure``, see its README):

``/proc/stat``
    ``cpu  user nice system idle iowait irq softirq steal guest guest_nice`` (jiffies; older
    kernels print fewer columns), one ``cpuN`` row per online CPU, then ``intr``, ``ctxt N``,
    ``btime``, ``processes``, ``procs_running``, ``procs_blocked``, ``softirq``.  ``guest`` is
    already counted in ``user`` and ``guest_nice`` in ``nice``.

``/proc/net/snmp`` and ``/proc/net/netstat``
    Pairs of lines with the same ``Prefix:``: the first names the counters, the second holds
    their values (``Tcp: ... MaxConn ...`` is ``-1``, so values may be negative).

``/proc/net/dev``
    Two header lines (``Inter-|   Receive ... |  Transmit`` and `` face |bytes packets errs
    drop fifo frame compressed multicast|bytes packets errs drop fifo colls carrier
    compressed``), then ``  NAME: 16 numbers`` per device.  A long name and a large first
    counter can run together (``dklink0:953183``).

``ss -tinO`` (``-t`` TCP, ``-i`` tcp_info, ``-n`` numeric, ``-O`` one line per socket)
    A header (``State Recv-Q Send-Q Local Address:Port Peer Address:Port Process``), then per
    socket: state, Recv-Q, Send-Q, local and peer address (IPv6 in brackets:
    ``[::ffff:10.0.0.2]:5201``), then the tcp_info words.  Most are ``name:value``
    (``cwnd:1278``, ``rtt:50.776/0.412`` = srtt/rttvar ms, ``retrans:0/9270`` = now/total,
    ``busy:2416ms``, ``rwnd_limited:852ms(35.3%)``, ``sndbuf_limited:620ms(21.2%)``); three
    rates are ``name value`` pairs (``send 291561998bps``, ``pacing_rate 158965976bps`` -- or
    ``X/Ybps`` with a max pacing rate --, ``delivery_rate 125822352bps``); bare words are the
    congestion control (``bbr``, ``cubic``) and flags (``ts``, ``sack``, ``ecn``,
    ``app_limited``); groups are ``name:(k:v,...)`` (``bbr:(bw:128457352bps,mrtt:50.128,
    pacing_gain:1.25,cwnd_gain:2)``).  ``rwnd_limited`` and ``sndbuf_limited`` are left out
    when zero.  Without ``-n`` rates carry SI prefixes (``2.9Mbps``); without ``-O`` the
    tcp_info words go on an indented second line.  Both are accepted.
"""

from __future__ import annotations

import re
from typing import Any

from dtnkit.host.parsers import ParseError, error_at, require_text

__all__ = ["parse_net_dev", "parse_proc_stat", "parse_snmp", "parse_ss_tin"]

CPU_FIELDS = (
    "user",
    "nice",
    "system",
    "idle",
    "iowait",
    "irq",
    "softirq",
    "steal",
    "guest",
    "guest_nice",
)


def _int(value: str, source: str, lineno: int, line: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise error_at(source, f"expected an integer, got {value!r}", lineno, line) from None


# ---- /proc/stat ----------------------------------------------------------------------------------
def parse_proc_stat(text: str) -> dict[str, Any]:
    """``{"cpus": {"cpu": {user, nice, ...}, "cpu0": {...}}, "ctxt": int, ...}`` (jiffies).

    Also ``procs_running`` and ``procs_blocked`` when present.  Columns a kernel does not print
    are 0.
    """
    source = "/proc/stat"
    require_text(text, source)
    cpus: dict[str, dict[str, int]] = {}
    out: dict[str, Any] = {"cpus": cpus}
    for lineno, line in enumerate(text.splitlines(), 1):
        words = line.split()
        if not words:
            continue
        name = words[0]
        if name.startswith("cpu"):
            if not (name == "cpu" or name[3:].isdigit()):
                raise error_at(source, "unknown cpu row", lineno, line)
            values = [_int(w, source, lineno, line) for w in words[1:]]
            if len(values) < 4:
                raise error_at(source, "a cpu row has at least 4 columns", lineno, line)
            if any(v < 0 for v in values):
                raise error_at(source, "negative jiffies", lineno, line)
            row = dict.fromkeys(CPU_FIELDS, 0)
            row.update(zip(CPU_FIELDS, values, strict=False))
            cpus[name] = row
        elif name in ("ctxt", "procs_running", "procs_blocked", "processes", "btime"):
            if len(words) != 2:
                raise error_at(source, f"expected `{name} N`", lineno, line)
            out[name] = _int(words[1], source, lineno, line)
        elif not re.fullmatch(r"[a-z_]+", name):
            raise error_at(source, "not a /proc/stat row", lineno, line)
    if "cpu" not in cpus:
        raise error_at(source, "no `cpu` row")
    if "ctxt" not in out:
        raise error_at(source, "no `ctxt` row")
    return out


# ---- /proc/net/snmp, /proc/net/netstat -----------------------------------------------------------
def parse_snmp(text: str) -> dict[str, dict[str, int]]:
    """``{"Tcp": {"OutSegs": n, ...}, "TcpExt": {...}, ...}`` from header/value line pairs."""
    source = "/proc/net/snmp"
    require_text(text, source)
    lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if len(lines) % 2:
        n, line = lines[-1]
        raise error_at(source, "a header line without its value line", n, line)
    out: dict[str, dict[str, int]] = {}
    for (hn, head), (vn, vals) in zip(lines[::2], lines[1::2], strict=True):
        hprefix, hsep, hrest = head.partition(":")
        vprefix, vsep, vrest = vals.partition(":")
        if not hsep or not hprefix.strip() or " " in hprefix.strip():
            raise error_at(source, "expected `Prefix: Name Name ...`", hn, head)
        if not vsep or vprefix != hprefix:
            raise error_at(source, f"expected the values of {hprefix}", vn, vals)
        names, values = hrest.split(), vrest.split()
        if len(names) != len(values):
            raise error_at(
                source, f"{hprefix} has {len(names)} names but {len(values)} values", vn, vals
            )
        for name in names:
            if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", name):
                raise error_at(source, f"bad counter name {name!r}", hn, head)
        out[hprefix.strip()] = {
            k: _int(v, source, vn, vals) for k, v in zip(names, values, strict=True)
        }
    return out


# ---- /proc/net/dev -------------------------------------------------------------------------------
def parse_net_dev(text: str) -> dict[str, dict[str, int]]:
    """``{"eth0": {"rx_bytes", "rx_packets", "rx_errs", "rx_drop", ..., "tx_bytes", ...}}``."""
    source = "/proc/net/dev"
    require_text(text, source)
    lines = text.splitlines()
    fields: list[str] | None = None
    out: dict[str, dict[str, int]] = {}
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if line.lstrip().startswith("Inter-"):
            continue
        if "|" in line and fields is None:
            parts = line.split("|")
            if len(parts) != 3 or parts[0].strip() != "face":
                raise error_at(source, "unknown header", lineno, line)
            fields = [f"rx_{w}" for w in parts[1].split()] + [f"tx_{w}" for w in parts[2].split()]
            continue
        if fields is None:
            raise error_at(source, "a device row before the header", lineno, line)
        name, sep, rest = line.strip().partition(":")
        if not sep or not name or " " in name:
            raise error_at(source, "expected `NAME: counters`", lineno, line)
        values = rest.split()
        if len(values) != len(fields):
            raise error_at(
                source, f"expected {len(fields)} counters, got {len(values)}", lineno, line
            )
        out[name] = {k: _int(v, source, lineno, line) for k, v in zip(fields, values, strict=True)}
    if fields is None:
        raise error_at(source, "no header")
    return out


# ---- ss -tinO ------------------------------------------------------------------------------------
_STATE = re.compile(r"[A-Z][A-Z0-9]*(-[A-Z0-9]+)*")
_RATE = re.compile(r"([0-9]+(?:\.[0-9]+)?)([KMG]?)bps")
_PREFIX = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9}
_MS_LIMITED = re.compile(r"([0-9]+)ms\(([0-9]+(?:\.[0-9]+)?)%\)")
_NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")
# tcp_info words whose value is a time in ms: key in the dict gets an ``_ms`` suffix
_MS_KEYS = {"rto", "ato", "minrtt", "rcv_rtt", "lastsnd", "lastrcv", "lastack"}
_RATE_WORDS = {
    "send": "send_bps",
    "pacing_rate": "pacing_rate_bps",
    "delivery_rate": "delivery_rate_bps",
}
_FLAGS = {"ts", "sack", "ecn", "ecnseen", "fastopen", "app_limited", "bidir", "<->"}
_NETIDS = {"tcp", "mptcp", "udp", "raw", "u_str", "u_dgr", "u_seq", "sctp", "dccp"}
_SOURCE = "ss -tinO"


def _rate(value: str, lineno: int, line: str) -> int:
    m = _RATE.fullmatch(value)
    if not m:
        raise error_at(_SOURCE, f"expected a rate like 123bps, got {value!r}", lineno, line)
    return round(float(m.group(1)) * _PREFIX[m.group(2)])


def _num(value: str, lineno: int, line: str, what: str) -> float:
    if not _NUMBER.fullmatch(value):
        raise error_at(_SOURCE, f"{what}: expected a number, got {value!r}", lineno, line)
    return float(value)


def _split_addr(addr: str) -> tuple[str, str]:
    """``10.0.0.1:5201`` / ``[::1]:5201`` / ``*:*`` -> (address, port)."""
    host, _, port = addr.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, port


def _group(name: str, body: str, flow: dict[str, Any], lineno: int, line: str) -> None:
    """``bbr:(bw:..,mrtt:..,pacing_gain:..,cwnd_gain:..)``; other groups are kept raw."""
    if name != "bbr":
        flow[name] = body
        return
    for item in body.split(","):
        k, sep, v = item.partition(":")
        if not sep:
            raise error_at(_SOURCE, f"bbr: expected k:v, got {item!r}", lineno, line)
        if k == "bw":
            flow["bbr_bw_bps"] = _rate(v, lineno, line)
        elif k == "mrtt":
            flow["bbr_mrtt_ms"] = _num(v, lineno, line, "bbr mrtt")
        elif k in ("pacing_gain", "cwnd_gain"):
            flow[f"bbr_{k}"] = _num(v, lineno, line, f"bbr {k}")
        else:
            flow[f"bbr_{k}"] = v


def _info(words: list[str], flow: dict[str, Any], lineno: int, line: str) -> None:
    flags: list[str] = flow.setdefault("flags", [])
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if word in _RATE_WORDS:
            if i >= len(words):
                raise error_at(_SOURCE, f"{word} without a value", lineno, line)
            value = words[i]
            i += 1
            first, _, peak = value.partition("/")
            if peak:  # pacing_rate 100bps/200bps: the second is the max pacing rate
                flow[f"{word}_max_bps"] = _rate(peak, lineno, line)
            flow[_RATE_WORDS[word]] = _rate(first, lineno, line)
            continue
        key, sep, value = word.partition(":")
        if not sep:
            if not re.fullmatch(r"[A-Za-z<][A-Za-z0-9_<>-]*", word):
                raise error_at(_SOURCE, f"unexpected word {word!r}", lineno, line)
            if word not in _FLAGS and not word.startswith("tcp-ulp-") and "cc" not in flow:
                flow["cc"] = word  # the congestion control: the one bare word not a flag
                continue
            flags.append(word)
            if word == "app_limited":
                flow["app_limited"] = True
            continue
        if value.startswith("("):
            body = value
            while not body.endswith(")") and i < len(words):  # a group with spaces
                body += " " + words[i]
                i += 1
            if not body.endswith(")"):
                raise error_at(_SOURCE, f"unclosed group {key}:(", lineno, line)
            _group(key, body[1:-1], flow, lineno, line)
            continue
        if key == "rtt":
            srtt, _, var = value.partition("/")
            flow["rtt_ms"] = _num(srtt, lineno, line, "rtt")
            if var:
                flow["rttvar_ms"] = _num(var, lineno, line, "rttvar")
        elif key == "retrans":
            now, _, total = value.partition("/")
            flow["retrans"] = int(_num(now, lineno, line, "retrans"))
            if total:
                flow["retrans_total"] = int(_num(total, lineno, line, "retrans total"))
        elif key in ("rwnd_limited", "sndbuf_limited", "cwnd_limited"):
            m = _MS_LIMITED.fullmatch(value)
            if not m:
                raise error_at(_SOURCE, f"{key}: expected Nms(P%), got {value!r}", lineno, line)
            flow[f"{key}_ms"] = int(m.group(1))
            flow[f"{key}_pct"] = float(m.group(2))
        elif key == "busy":
            if not value.endswith("ms"):
                raise error_at(_SOURCE, f"busy: expected Nms, got {value!r}", lineno, line)
            flow["busy_ms"] = int(_num(value[:-2], lineno, line, "busy"))
        elif key == "wscale":
            snd, _, rcv = value.partition(",")
            flow["snd_wscale"] = int(_num(snd, lineno, line, "wscale"))
            if rcv:
                flow["rcv_wscale"] = int(_num(rcv, lineno, line, "wscale"))
        elif key in _MS_KEYS:
            flow[f"{key}_ms"] = _num(value, lineno, line, key)
        elif _NUMBER.fullmatch(value):
            flow[key] = int(value) if "." not in value else float(value)
        else:
            flow[key] = value  # e.g. cgroup:/ or an ULP's words: kept as text


def parse_ss_tin(text: str) -> list[dict[str, Any]]:
    """One dict per socket of ``ss -tinO`` (or ``ss -tin``) output.

    Keys: ``state``, ``recv_q``, ``send_q``, ``local``, ``peer`` (``addr:port`` as printed,
    brackets kept), ``local_addr``/``local_port``/``peer_addr``/``peer_port``, ``cc``,
    ``flags``, then what the socket reports: ``cwnd``, ``ssthresh``, ``mss``, ``rtt_ms``,
    ``rttvar_ms``, ``minrtt_ms``, ``rto_ms``, ``pacing_rate_bps``, ``delivery_rate_bps``,
    ``send_bps``, ``bytes_sent``, ``bytes_acked``, ``bytes_retrans``, ``retrans`` (now),
    ``retrans_total``, ``busy_ms``, ``rwnd_limited_ms``/``_pct``, ``sndbuf_limited_ms``/``_pct``,
    ``bbr_bw_bps``, ``bbr_mrtt_ms``, ``bbr_pacing_gain``, ``bbr_cwnd_gain`` ... and any other
    ``name:number`` word under its own name.  What ss does not print is missing.
    """
    if not isinstance(text, str):
        raise ParseError(f"{_SOURCE}: expected text (str), got {type(text).__name__}")
    flows: list[dict[str, Any]] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        words = line.split()
        if line[0] in " \t":  # ss without -O: tcp_info on an indented continuation line
            if not flows:
                raise error_at(_SOURCE, "tcp_info before any socket", lineno, line)
            _info(words, flows[-1], lineno, line)
            continue
        if words[0] in ("State", "Netid"):
            continue  # header
        if words[0] in _NETIDS and len(words) > 1 and _STATE.fullmatch(words[1]):
            words = words[1:]
        if len(words) < 5 or not _STATE.fullmatch(words[0]):
            raise error_at(_SOURCE, "expected `STATE RECV-Q SEND-Q LOCAL PEER ...`", lineno, line)
        state, recv_q, send_q, local, peer = words[:5]
        if not (recv_q.isdigit() and send_q.isdigit()):
            raise error_at(_SOURCE, "Recv-Q and Send-Q must be numbers", lineno, line)
        if ":" not in local or ":" not in peer:
            raise error_at(_SOURCE, "expected ADDRESS:PORT", lineno, line)
        laddr, lport = _split_addr(local)
        paddr, pport = _split_addr(peer)
        flow: dict[str, Any] = {
            "state": state,
            "recv_q": int(recv_q),
            "send_q": int(send_q),
            "local": local,
            "peer": peer,
            "local_addr": laddr,
            "local_port": lport,
            "peer_addr": paddr,
            "peer_port": pport,
        }
        rest = words[5:]
        if rest and rest[0].startswith("users:"):  # -p
            flow["users"] = rest[0]
            rest = rest[1:]
        _info(rest, flow, lineno, line)
        flows.append(flow)
    return flows
