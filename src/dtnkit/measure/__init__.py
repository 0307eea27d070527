"""Measurement: probes (what: net, disk, e2e) and loads (many transfers at once: a sweep
point) apart from tools (how: iperf3, fio, dtnkit cp, a command template, the third-party
copies), joined by one registry; the samplers beside every run; the results store.

``probes/``: each probe's spec and the summary keys every tool of its kind gives; ``load``:
a load's spec and the servers it moves from.
``tools/``: one module per tool (``can_run``, ``run``, a pure ``parse``); ``workers``: what
the tools share when they run a load.
``tool.py``: what a tool offers and returns.  ``registry.py``: kinds -> tools, ``run_probe``
and ``run_load``.  ``procs.py``: the processes a load starts, stopped by PID.
``result.py``: one run's result.  ``store.py``: results and experiments in SQLite.
``sampler.py`` (one host) and ``pathsampler.py`` (a lab path) with ``parsers.py``: host
counters and per-flow state while a tool runs.
"""
