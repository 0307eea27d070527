"""SciTags: whether something on this host marks its flows (flowd-go, flowd, XRootD's
``xrootd.pmark``, dCache's fireflies, ``dtnkit serve``)."""

from __future__ import annotations

from dtnkit.diagnose import sitecfg
from dtnkit.diagnose.checklist.base import Check, ChecklistStatus, Facts, Item
from dtnkit.diagnose.checklist.procs import files_in, is_dtnkit, read_file, running_here


def _scitags(item: Item, f: Facts) -> None:
    host, procs, j = f.host, f.procs, f.judging
    procs = running_here(host, procs)
    active: list[str] = []
    partial: list[str] = []
    # flow services: flowd-go, flowd
    running = {p.program: p for p in procs if p.program in ("flowd-go", "flowd")}
    for p in running.values():
        item.saw(f"process {p.pid}", p.line)
    conf = read_file(host, "/etc/flowd-go/conf.yaml")
    if conf is not None:
        backends = sitecfg.flowd_go_backends(conf)
        item.saw("/etc/flowd-go/conf.yaml", f"backends: {', '.join(backends) or 'none'}")
        if "flowd-go" in running and backends:
            active.append(f"flowd-go ({', '.join(backends)})")
        elif backends:
            partial.append("flowd-go configured but not running")
        else:
            partial.append("/etc/flowd-go/conf.yaml turns on no backend")
    elif "flowd-go" in running:
        active.append("flowd-go running")
    cfg = read_file(host, "/etc/flowd/flowd.cfg")
    if cfg is not None:
        values = sitecfg.flowd_cfg(cfg)
        item.saw(
            "/etc/flowd/flowd.cfg",
            f"PLUGIN={values.get('PLUGIN', '-')} BACKEND={values.get('BACKEND', '-')}",
        )
        if "flowd" in running and values.get("BACKEND"):
            active.append(f"flowd ({values['BACKEND']})")
        elif values.get("BACKEND"):
            partial.append("flowd configured but not running")
    elif "flowd" in running:
        active.append("flowd running")
    # XRootD: xrootd.pmark in its configuration (the -c of running servers, /etc/xrootd)
    paths = [
        *files_in(host, "/etc/xrootd", ".cfg"),
        *files_in(host, "/etc/xrootd/config.d", ".cfg"),
    ]
    for p in procs:
        if p.program == "xrootd":
            c = sitecfg.option_value(p.args, "-c")
            if c and c.startswith("/") and c not in paths:
                paths.append(c)
    seen: set[str] = set()
    for path in paths:
        text = read_file(host, path) if path not in seen else None
        seen.add(path)
        if text is None:
            continue
        for inc in sitecfg.xrootd_includes(text)[:8]:
            more = files_in(host, inc) if host.listdir(inc) else [inc]
            for extra in more:
                if extra not in seen:
                    seen.add(extra)
                    text += "\n" + (read_file(host, extra) or "")
        pmark = sitecfg.parse_xrootd_pmark(text)
        if not pmark.lines:
            continue
        item.saw(path, "; ".join(pmark.lines)[:200])
        if pmark.fireflies_on and not pmark.problems:
            active.append(f"xrootd.pmark ffdest {','.join(pmark.ffdest)} ({path})")
        else:
            partial.append(f"xrootd.pmark in {path}: {'; '.join(pmark.problems)}")
    # dCache
    for path in ["/etc/dcache/dcache.conf", *files_in(host, "/etc/dcache/layouts", ".conf")]:
        text = read_file(host, path)
        on = sitecfg.dcache_firefly(text) if text is not None else None
        if on is not None:
            item.saw(path, f"pool.enable.firefly={'true' if on else 'false'}")
            (active if on else partial).append(f"dCache fireflies {'on' if on else 'off'}")
    # dtnkit serve's own marking
    for p in procs:
        if is_dtnkit(p, "serve"):
            flags = [
                a.split("=")[0] for a in p.args if a.startswith(("--scitag", "--firefly-dest"))
            ]
            item.saw(f"process {p.pid}", p.line)
            if flags:
                active.append(f"dtnkit serve with {', '.join(sorted(set(flags)))}")
            else:
                partial.append(
                    f"dtnkit serve (pid {p.pid}) runs without --scitag or --firefly-dest"
                )
    if active:
        item.summary = "; ".join(active)
        if partial:
            item.summary += f" (also: {'; '.join(partial)})"
    elif partial:
        item.status, item.summary = ChecklistStatus.WARN, "; ".join(partial)
        item.next = (
            "complete it: xrootd.pmark ffdest HOST:10514, start flowd-go, or "
            f"{j.shell('dtnkit serve --scitag N ...')} (docs/monitoring.md)"
        )
    else:
        item.saw("processes, /etc/flowd-go, /etc/flowd, /etc/xrootd, /etc/dcache", "no marking")
        item.status, item.summary = ChecklistStatus.FAIL, "no SciTags marking found"
        item.next = (
            "configure xrootd.pmark ffdest HOST:10514 (XRootD), "
            "pool.enable.firefly=true (dCache), or install flowd-go"
        )


SCITAGS = Check("scitags", "dc27", "SciTags: flow marking configured", _scitags)
