"""Monitoring: perfSONAR here or reachable, and the host's metrics and flow export."""

from __future__ import annotations

from dtnkit.diagnose import sitecfg
from dtnkit.diagnose.checklist.base import Check, ChecklistStatus, Facts, Item
from dtnkit.diagnose.checklist.procs import (
    files_in,
    is_dtnkit,
    read_file,
    running_here,
    watches_here,
)
from dtnkit.host.host import Host
from dtnkit.tune.judging import Judging

NODE_EXPORTER_PORT = 9100


def _curl(host: Host, url: str, timeout_s: int) -> tuple[int | None, str, str]:
    """(HTTP status or None, body start, error) of a GET through the Host (its namespace)."""
    res = host.query(
        ["curl", "-sS", "-k", "-m", str(timeout_s), "-o", "-", "-w", "\n%{http_code}", url]
    )
    if res.returncode == 127 and "not found" in res.stderr + res.stdout:
        return None, "", "curl is not installed"
    body, _, code = res.stdout.rpartition("\n")
    status = int(code) if code.strip().isdigit() and int(code) > 0 else None
    err = res.stderr.strip().splitlines()[-1][:120] if res.stderr.strip() else ""
    return status, body[:400], err or (f"curl exit {res.returncode}" if not res.ok else "")


def _perfsonar(item: Item, f: Facts) -> None:
    host, url, j = f.host, f.opts.perfsonar, f.judging
    local = None
    if host.is_live:
        if host.has_tool("pscheduler"):
            local = "pscheduler on PATH"
    else:
        for path in ("/usr/bin/pscheduler", "/usr/local/bin/pscheduler"):
            if host.exists(path):
                local = path
    item.saw("pscheduler", local or "not installed")
    if url is not None:
        api = url.rstrip("/") + ("" if url.rstrip("/").endswith("/pscheduler") else "/pscheduler")
        status, body, err = _curl(host, api + "/", 5)
        item.saw(f"GET {api}/", f"HTTP {status}" if status else err or "no answer")
        if status == 200 and "pscheduler" in body.lower():
            item.summary = f"toolkit answers at {api}/"
        elif status is not None:
            item.status = ChecklistStatus.WARN if local else ChecklistStatus.FAIL
            item.summary = f"{api}/ answered HTTP {status}, not the pScheduler API"
            item.next = f"{j.shell(f'curl -k {api}/')}  (is it a perfSONAR toolkit?)"
        else:
            item.status = ChecklistStatus.WARN if local else ChecklistStatus.FAIL
            item.summary = f"{api}/ unreachable: {err or 'no answer'}"
            item.next = j.shell(f"curl -kv {api}/")
        if local and item.status != ChecklistStatus.PASS:
            item.summary += f"; {local}"
        return
    if local:
        item.summary = local
    else:
        item.status, item.summary = ChecklistStatus.WARN, "no pscheduler on this host"
        item.next = "give --perfsonar URL of the site's perfSONAR toolkit to check it"


def _flow_monitoring(item: Item, f: Facts) -> None:
    host, procs, j = f.host, f.procs, f.judging
    exporters = [
        p
        for p in procs
        if watches_here(host, p)
        and (
            p.program in ("node_exporter", "prometheus-node-exporter")
            or is_dtnkit(p, "exporter")
            or (is_dtnkit(p, "serve") and "--metrics" in p.args)
        )
    ]
    procs = running_here(host, procs)
    for p in exporters[:4]:
        item.saw(f"process {p.pid}", p.line)
    metrics = bool(exporters)
    if not metrics and host.is_live:
        url = f"http://127.0.0.1:{NODE_EXPORTER_PORT}/metrics"
        status, _, err = _curl(host, url, 2)
        item.saw(f"GET {url}", f"HTTP {status}" if status else err or "no answer")
        metrics = status == 200
    export: list[str] = []
    flow_progs = ("softflowd", "pmacctd", "uacctd", "hsflowd", "fprobe", "nprobe", "goflow2")
    for p in procs:
        if p.program in flow_progs:
            item.saw(f"process {p.pid}", p.line)
            export.append(f"{p.program} running")
    for path in ["/etc/default/softflowd", *files_in(host, "/etc/softflowd", ".conf")]:
        text = read_file(host, path)
        where = sitecfg.softflowd_export(text) if text else None
        if where:
            item.saw(path, where)
            export.append(f"softflowd {where}")
    for path in files_in(host, "/etc/pmacct", ".conf"):
        text = read_file(host, path)
        plugins = sitecfg.pmacct_export(text) if text else []
        if plugins:
            item.saw(path, ", ".join(plugins))
            export.append(f"pmacct {', '.join(plugins)}")
    hs = read_file(host, "/etc/hsflowd.conf")
    if hs is not None and sitecfg.uncommented(hs):
        item.saw("/etc/hsflowd.conf", f"{len(sitecfg.uncommented(hs))} settings")
        export.append("hsflowd configured")
    if host.exists("/proc/net/stat/ipt_netflow"):
        item.saw("/proc/net/stat/ipt_netflow", "present")
        export.append("ipt_NETFLOW loaded")
    have = []
    if metrics:
        have.append(
            "host metrics ("
            + (
                ", ".join(
                    sorted(
                        {
                            p.program if p.program != "dtnkit" else f"dtnkit {p.args[0]}"
                            for p in exporters
                        }
                    )
                )
                or f"port {NODE_EXPORTER_PORT}"
            )
            + ")"
        )
    if export:
        have.append("flow export (" + "; ".join(export[:3]) + ")")
    if metrics and export:
        item.summary = ", ".join(have)
    elif metrics or export:
        item.status = ChecklistStatus.WARN
        missing = (
            "no flow export on this host (the site routers may export NetFlow/IPFIX: "
            "ask the network team)"
            if metrics
            else "no node_exporter or dtnkit exporter"
        )
        item.summary = f"{have[0]}; {missing}"
        item.next = (
            f"{j.shell('softflowd -i DEV -n COLLECTOR:PORT')}, or confirm router-side export"
            if metrics
            else f"run {_exporter_hint(j)} or prometheus-node-exporter"
        )
    else:
        item.status = ChecklistStatus.FAIL
        item.summary = "no host metrics exporter and no flow export"
        item.next = f"run {_exporter_hint(j)} (or prometheus-node-exporter) and a flow exporter"


def _exporter_hint(j: Judging) -> str:
    """``dtnkit exporter`` judging as the checklist did, reading the counters it looked at."""
    if j.tree is not None:
        return f"{j.command('exporter', scope=False)} on the host {j.tree} was captured from"
    return j.command("exporter")


PERFSONAR = Check(
    "perfsonar", "dc27", "perfSONAR: pscheduler here or a toolkit reachable", _perfsonar
)
FLOW_MONITORING = Check(
    "flow-monitoring", "dc27", "WAN flows monitored: host metrics and flow export", _flow_monitoring
)
