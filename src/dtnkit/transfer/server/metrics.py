"""``dtnkit serve --metrics``: the mover's series at ``GET /metrics`` (Prometheus text
format), read from :class:`~dtnkit.transfer.server.flows.Flows` at each scrape.

Names are ``dtnkit_transfer_<name>_<unit>``, counters end in ``_total``, units are bytes,
seconds and ratios.  Stream utilisation is a stream's rate against its fair share of the
capacity (``--capacity``, else the speed of the link towards the peers), averaged over the
active streams: ``sum(rate) / capacity``; absent when the capacity is not known.
"""

from __future__ import annotations

import time

from dtnkit.transfer.server.config import Counters
from dtnkit.transfer.server.flows import Flows
from dtnkit.transfer.wire.exposition import Family, render

PREFIX = "dtnkit_transfer_"


def families(flows: Flows, counters: Counters | None = None) -> list[Family]:
    """Fresh metric families for one scrape."""
    now = time.monotonic()
    with flows.lock:
        active = list(flows.active)
        done_sent, done_received = flows.done_sent, flows.done_received
        streams_total, tagged, rejected = (
            flows.streams_total,
            flows.tagged_total,
            flows.rejected_tags,
        )
    data = [s for s in active if s.method != "COPY"]
    live = [(s, *s.moved()) for s in data]
    sent = done_sent + sum(x for _s, x, _r in live)
    received = done_received + sum(r for _s, _x, r in live)
    rates = [(x + r) / max(now - s.t0, 1e-3) for s, x, r in live]
    transfers = {(s.peer, s.path) for s in active}
    out = [
        Family(
            PREFIX + "active_transfers",
            "gauge",
            "Transfers in progress: client and path pairs with a stream open.",
        ).add(len(transfers)),
        Family(PREFIX + "active_streams", "gauge", "Requests moving a body now (GET, PUT).").add(
            len(data)
        ),
        Family(
            PREFIX + "sent_bytes_total",
            "counter",
            "Bytes of data streams acknowledged by the peers (TCP_INFO).",
        ).add(sent),
        Family(
            PREFIX + "received_bytes_total", "counter", "Bytes received on data streams (TCP_INFO)."
        ).add(received),
        Family(
            PREFIX + "streams_total",
            "counter",
            "Data streams finished (requests that moved a body).",
        ).add(streams_total),
        Family(
            PREFIX + "stream_rate_bytes_per_second",
            "gauge",
            "Mean rate of the active streams since each began (0 without one).",
        ).add(sum(rates) / len(rates) if rates else 0.0),
    ]
    capacity = flows.capacity_for(data)
    if capacity is not None and capacity > 0:
        out.append(
            Family(
                PREFIX + "capacity_bytes_per_second",
                "gauge",
                "Capacity the streams share (--capacity, else the link speed).",
            ).add(capacity)
        )
        out.append(
            Family(
                PREFIX + "stream_utilisation_ratio",
                "gauge",
                "Mean stream rate against its fair share of the capacity (0-1).",
            ).add(sum(rates) / capacity)
        )
    marking = flows.marking
    out += [
        Family(
            PREFIX + "tagged_streams_total",
            "counter",
            "Data streams (that moved a body) with a SciTags tag.",
        ).add(tagged),
        Family(
            PREFIX + "scitag_rejected_total",
            "counter",
            "SciTag headers ignored (not a number, out of range, repeated).",
        ).add(rejected),
        Family(
            PREFIX + "fireflies_enabled",
            "gauge",
            "1 when this server sends fireflies (--firefly-dest given).",
        ).add(1 if marking.fireflies else 0),
        Family(PREFIX + "fireflies_sent_total", "counter", "Firefly datagrams sent.").add(
            flows.fireflies.sent
        ),
        Family(
            PREFIX + "firefly_errors_total", "counter", "Firefly datagrams that could not be sent."
        ).add(flows.fireflies.errors),
    ]
    if counters is not None:
        snap = counters.snapshot()
        out.append(
            Family(PREFIX + "requests_total", "counter", "Requests answered.").add(snap["requests"])
        )
    return out


def exposition(flows: Flows, counters: Counters | None = None) -> str:
    return render(families(flows, counters))
