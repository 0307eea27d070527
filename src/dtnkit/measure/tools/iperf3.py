"""The network tool iperf3: real iperf3 with JSON output, beside the sampler.

When the peer is a lab host (``NAME/HOST``) or localhost, the probe starts its own one-shot
iperf3 server there and stops it afterwards; any other peer must run ``iperf3 -s`` already.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import time
from collections.abc import Callable, Iterator
from typing import Any

from dtnkit.errors import BadInput, DtnkitError
from dtnkit.host import process
from dtnkit.host.host import Host
from dtnkit.measure.probes.net import KIND as NET_KIND
from dtnkit.measure.probes.net import NetSpec, Peer, resolve_peer
from dtnkit.measure.sampler import ACTIVE_BYTES, Sampler
from dtnkit.measure.tool import Context, ToolRun
from dtnkit.progress import Interval, Progress

#: the iperf3 user a client authenticates as to a campaign's probe server (the password: the
#: campaign's token; see dtnkit.diagnose.campaign)
AUTH_USER = "dtnkit"


@contextlib.contextmanager
def server(peer: Peer, port: int, host: Host, timeout_s: float = 10) -> Iterator[None]:
    """A one-shot iperf3 server in the peer's namespace (or this host's for localhost)."""
    if not peer.local:
        yield
        return
    argv = ["iperf3", "-s", "-1", "-p", str(port), "--forceflush"]
    argv = ["ip", "netns", "exec", peer.netns, *argv] if peer.netns else host.argv(argv)
    # a one-shot server ends after its test; leaving the block stops its group and reaps it
    with process.start(argv, stdout=process.PIPE, stderr=process.STDOUT, own_group=True,
                       grace_s=5.0) as proc:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()  # raw reads: a buffered readline would hide later lines
        deadline = time.monotonic() + timeout_s
        seen = b""
        while b"listening" not in seen:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise DtnkitError("the iperf3 server did not start",
                                  seen.decode(errors="replace").strip()[-300:] or
                                  f"no answer within {timeout_s:g} s")
            chunk = os.read(fd, 4096)
            if not chunk:
                raise DtnkitError("the iperf3 server exited",
                                  seen.decode(errors="replace").strip()[-300:])
            seen += chunk
        yield


def client_argv(spec: NetSpec, address: str) -> list[str]:
    argv = ["iperf3", "-c", address, "-p", str(spec.port), "-t", str(spec.duration_s),
            "-P", str(spec.streams), "-J", "--connect-timeout",
            str(int(spec.connect_timeout_s * 1000))]
    if spec.cc:
        argv += ["-C", spec.cc]
    if spec.fq_rate:
        argv += ["--fq-rate", spec.fq_rate]
    if spec.reverse:
        argv.append("-R")
    if spec.server_key:
        argv += ["--username", AUTH_USER, "--rsa-public-key-path", spec.server_key]
    return argv


def parse_iperf3(text: str) -> dict[str, Any]:
    """Summary of an iperf3 -J run (units in key names); raises DtnkitError on its error."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DtnkitError("iperf3 printed no JSON", text.strip()[-300:] or str(exc)) from exc
    if doc.get("error"):
        raise DtnkitError("iperf3 failed", str(doc["error"]),
                          "check that the peer answers and runs iperf3 -s")
    end = doc.get("end", {})
    sent, recv = end.get("sum_sent", {}), end.get("sum_received", {})
    senders = [s.get("sender", {}) for s in end.get("streams", [])]
    rtts = [s["mean_rtt"] for s in senders if s.get("mean_rtt")]
    min_rtts = [s["min_rtt"] for s in senders if s.get("min_rtt")]
    cwnds = [s["max_snd_cwnd"] for s in senders if s.get("max_snd_cwnd")]
    cpu = end.get("cpu_utilization_percent", {})
    return {
        "throughput_bps": float(recv.get("bits_per_second", 0.0)),
        "sent_bps": float(sent.get("bits_per_second", 0.0)),
        "bytes": int(recv.get("bytes", 0)),
        "retransmits": int(sent.get("retransmits", 0) or 0),
        "rtt_ms_mean": sum(rtts) / len(rtts) / 1000 if rtts else None,
        "rtt_ms_min": min(min_rtts) / 1000 if min_rtts else None,
        "snd_cwnd_bytes_max": max(cwnds) if cwnds else None,
        "streams": len(senders),
        "duration_s": float(sent.get("seconds", 0.0)),
        "cc": end.get("sender_tcp_congestion"),
        "cpu_local_pct": cpu.get("host_total"),
        "cpu_remote_pct": cpu.get("remote_total"),
    }


def flow_intervals(progress: Progress, *, reverse: bool = False,
                   duration_s: float | None = None) -> Callable[[dict[str, Any]], None]:
    """A sampler callback that reports each sample of the probe's own flows as an interval:
    bytes moved (acked by the peer; received with ``reverse``) and retransmits, from the
    ``ss -tinO`` counters of each flow, as iperf3 prints its intervals.  An idle interval
    after ``duration_s`` (the sampler's last, while iperf3 exits) is not reported."""
    seen: dict[tuple[str, str], tuple[int, int]] = {}
    last_end = [0.0]

    def on_sample(sample: dict[str, Any]) -> None:
        moved = retrans = 0
        for flow in sample.get("flows") or []:
            key = (str(flow.get("local")), str(flow.get("peer")))
            now = (int(flow.get("bytes_received" if reverse else "bytes_acked") or 0),
                   int(flow.get("retrans_total") or 0))
            before = seen.get(key, (0, 0))
            moved += max(0, now[0] - before[0])
            retrans += max(0, now[1] - before[1])
            seen[key] = now
        end = float(sample.get("t_s") or 0.0)
        start, last_end[0] = last_end[0], end
        if duration_s is not None and start >= duration_s and moved < ACTIVE_BYTES:
            return
        progress.interval(Interval(start, end, moved, retrans))

    return on_sample


class Iperf3:
    """iperf3 -J from ``host`` to the peer; a one-shot server when the peer is ours."""

    name = "iperf3"
    kind = NET_KIND
    about = "memory-to-memory TCP throughput (iperf3 -J)"
    package = "iperf3"

    def can_run(self) -> tuple[bool, list[str]]:
        if shutil.which("iperf3") is None:
            return False, ["iperf3 is not installed (apt-get install iperf3)"]
        return True, []

    def parse(self, text: str) -> dict[str, Any]:
        return parse_iperf3(text)

    def run(self, host: Host, spec: NetSpec, context: Context) -> ToolRun:
        peer = resolve_peer(spec.peer, context.lab_peers)
        with server(peer, spec.port, host):
            sampler = Sampler(host, interval_s=spec.interval_s,
                              ss_filter=["dport", "=", f":{spec.port}"],
                              on_sample=flow_intervals(context.progress, reverse=spec.reverse,
                                                       duration_s=spec.duration_s))
            with sampler:
                env = None
                if spec.server_key:
                    if not context.password:
                        raise BadInput("--server-key without a token", "the probe server lets "
                                       "in only clients that hold the campaign's token",
                                       "set $DTNKIT_TOKEN")
                    # iperf3 reads the password from its environment, never from argv (ps)
                    env = {**os.environ, "IPERF3_PASSWORD": context.password}
                try:
                    proc = process.run(host.argv(client_argv(spec, peer.address)),
                                       timeout=spec.duration_s + spec.connect_timeout_s + 30,
                                       env=env)
                except process.TimeoutExpired as exc:
                    raise DtnkitError(f"iperf3 to {peer.label} did not finish",
                                      f"no result within {exc.timeout:g} s",
                                      "check the path and the peer") from exc
        raw = proc.stdout or proc.stderr
        try:
            summary = parse_iperf3(raw)
        except DtnkitError as exc:
            exc.what = f"the network probe to {peer.label} failed"
            raise
        return ToolRun(summary, raw, sampler.samples, {"peer_address": peer.address})
