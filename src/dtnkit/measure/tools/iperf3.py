"""The network tool iperf3: real iperf3 with JSON output, beside the sampler.

A probe (:class:`~dtnkit.measure.probes.net.NetSpec`): when the peer is a lab host
(``NAME/HOST``) or localhost, the probe starts its own one-shot iperf3 server there and stops
it afterwards; any other peer must run ``iperf3 -s`` already.

A load (:class:`~dtnkit.measure.probes.load.LoadSpec`, a sweep point): one client per origin
(each runs ``iperf3 -s``), ``-R`` (the origin sends, as a download), the load's ``streams``
spread over the origins as ``-P``; each client is one transfer.  Its set-up (connecting the
streams, one round trip each) is left out of the measured time: the test ran its last
``seconds`` (iperf3's own count) before the client exited.
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
from dtnkit.measure.probes.load import LoadSpec
from dtnkit.measure.probes.net import KIND as NET_KIND
from dtnkit.measure.probes.net import NetSpec, Peer, resolve_peer
from dtnkit.measure.procs import Procs
from dtnkit.measure.sampler import ACTIVE_BYTES, Sampler
from dtnkit.measure.tool import ToolContext, ToolRun, Transfer
from dtnkit.measure.tools.workers import DEADLINE_MESSAGE, Runs, in_threads, split_streams
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
    with process.start(
        argv, stdout=process.PIPE, stderr=process.STDOUT, own_group=True, grace_s=5.0
    ) as proc:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()  # raw reads: a buffered readline would hide later lines
        deadline = time.monotonic() + timeout_s
        seen = b""
        while b"listening" not in seen:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise DtnkitError(
                    "the iperf3 server did not start",
                    seen.decode(errors="replace").strip()[-300:]
                    or f"no answer within {timeout_s:g} s",
                )
            chunk = os.read(fd, 4096)
            if not chunk:
                raise DtnkitError(
                    "the iperf3 server exited", seen.decode(errors="replace").strip()[-300:]
                )
            seen += chunk
        yield


def client_argv(spec: NetSpec, address: str) -> list[str]:
    argv = [
        "iperf3",
        "-c",
        address,
        "-p",
        str(spec.port),
        "-t",
        str(spec.duration_s),
        "-P",
        str(spec.streams),
        "-J",
        "--connect-timeout",
        str(int(spec.connect_timeout_s * 1000)),
    ]
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
        raise DtnkitError(
            "iperf3 failed", str(doc["error"]), "check that the peer answers and runs iperf3 -s"
        )
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


def flow_intervals(
    progress: Progress, *, reverse: bool = False, duration_s: float | None = None
) -> Callable[[dict[str, Any]], None]:
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
            now = (
                int(flow.get("bytes_received" if reverse else "bytes_acked") or 0),
                int(flow.get("retrans_total") or 0),
            )
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

    def run(self, host: Host, spec: NetSpec | LoadSpec, context: ToolContext) -> ToolRun:
        if isinstance(spec, LoadSpec):
            return run_load(host, spec, context)
        peer = resolve_peer(spec.peer, context.lab_peers)
        with server(peer, spec.port, host):
            sampler = Sampler(
                host,
                interval_s=spec.interval_s,
                ss_filter=["dport", "=", f":{spec.port}"],
                on_sample=flow_intervals(
                    context.progress, reverse=spec.reverse, duration_s=spec.duration_s
                ),
            )
            with sampler:
                env = None
                if spec.server_key:
                    if not context.password:
                        raise BadInput(
                            "--server-key without a token",
                            "the probe server lets in only clients that hold the campaign's token",
                            "set $DTNKIT_TOKEN",
                        )
                    # iperf3 reads the password from its environment, never from argv (ps)
                    env = {**os.environ, "IPERF3_PASSWORD": context.password}
                try:
                    proc = process.run(
                        host.argv(client_argv(spec, peer.address)),
                        timeout=spec.duration_s + spec.connect_timeout_s + 30,
                        env=env,
                    )
                except process.TimeoutExpired as exc:
                    raise DtnkitError(
                        f"iperf3 to {peer.label} did not finish",
                        f"no result within {exc.timeout:g} s",
                        "check the path and the peer",
                    ) from exc
        raw = proc.stdout or proc.stderr
        try:
            summary = parse_iperf3(raw)
        except DtnkitError as exc:
            exc.what = f"the network probe to {peer.label} failed"
            raise
        return ToolRun(summary, raw, sampler.samples, {"peer_address": peer.address})


#: tries of an iperf3 client its server refuses at once (the server re-listens between tests)
REFUSED_TRIES = 5


def load_argv(address: str, port: int, streams: int, spec: LoadSpec) -> list[str]:
    """One load client: ``streams`` of the load's, reversed (the origin sends), for the
    load's duration or its share of the bytes."""
    argv = [
        "iperf3",
        "-c",
        address,
        "-p",
        str(port),
        "-R",
        "-J",
        "-P",
        str(streams),
        "--connect-timeout",
        "5000",
    ]
    if spec.bytes is not None:
        return [*argv, "-n", str(max(1, spec.bytes * streams // spec.streams))]
    return [*argv, "-t", f"{spec.duration_s:g}"]


def run_load(host: Host, spec: LoadSpec, context: ToolContext) -> ToolRun:
    """One iperf3 client per origin at once (see the module's text); the clients that
    failed are the load's ``failed``, never raised."""
    shares = split_streams(spec.streams, len(spec.origins))
    deadline = (
        context.deadline if context.deadline is not None else time.monotonic() + spec.time_limit_s
    )
    procs = context.procs or Procs()
    runs = Runs(procs, host, context.workdir, deadline, time.monotonic())
    results: dict[int, tuple[int | None, str, str, float, float]] = {}

    def one(k: int) -> None:
        origin, n = spec.origins[k], shares[k]
        argv = load_argv(origin.host.address, origin.port, n, spec)
        for attempt in range(REFUSED_TRIES):
            res = runs.run(argv)
            _code, out, _err, start, end = res
            # `iperf3 -s` closes and reopens its listening socket between tests: a
            # refusal straight after the previous point is that window, not an error
            # (iperf3 3.12 -J exits 0 even then: its JSON says "Connection refused")
            if (
                "Connection refused" not in out
                or end - start > 1.0
                or time.monotonic() > deadline
                or attempt == REFUSED_TRIES - 1
            ):
                break
            time.sleep(0.05 * (attempt + 1))  # bounded: at most 0.5 s over all tries
        results[k] = res

    try:
        in_threads(sum(1 for s in shares if s), one)
    finally:
        if context.procs is None:
            procs.stop_all()
    transfers: list[Transfer] = []
    retrans: int | None = 0
    failed = ""
    data_from: list[tuple[float, float]] = []  # (latest start of the data, its seconds)
    for k in sorted(results):
        code, out, err, start, end = results[k]
        nbytes, error, r = 0, "", None
        try:
            doc = json.loads(out)
            end_doc = doc.get("end", {})
            nbytes = int(end_doc.get("sum_received", {}).get("bytes", 0))
            # the test ran for `seconds` before the client's exit and the results exchange
            # before it: everything before that was connecting its streams (the exchange,
            # long on a loaded machine, is placed by the samples: ToolRun.measure_seconds)
            seconds = float(end_doc.get("sum_received", {}).get("seconds", 0) or 0)
            if 0 < seconds <= end - start:
                data_from.append((end - seconds, seconds))
            r = end_doc.get("sum_sent", {}).get("retransmits")
            error = str(doc.get("error", ""))
        except (json.JSONDecodeError, TypeError, ValueError, AttributeError):
            error = (err or out).strip()[-300:] or f"exit status {code}"
        if code != 0 and not error:
            error = f"exit status {code}"
        if code is None:
            error = "stopped at the time limit"
        retrans = retrans + int(r) if retrans is not None and r is not None else None
        transfers.append(Transfer(start, end if not error else None, nbytes, False, error))
        if error and not failed:
            failed = f"iperf3 to origin {k}: {error}"
    if runs.timed_out:
        failed = DEADLINE_MESSAGE.format(limit=spec.time_limit_s)
    latest, seconds_of = max(data_from) if data_from and not failed else (None, None)
    return ToolRun(
        {} if retrans is None else {"retransmits": retrans},
        runs.output(),
        transfers=tuple(transfers),
        failed=failed,
        measure_from_s=latest,
        measure_seconds=seconds_of,
    )
