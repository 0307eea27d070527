"""Measurement: probes (what: net, disk, e2e) apart from tools (how: iperf3, fio, a command
template, dtnkit cp), joined by one registry; the sampler beside every run; the results store.

``probes/``: each probe's spec and the summary keys every tool of its kind gives.
``tools/``: one module per tool (``can_run``, ``run``, a pure ``parse``).
``tool.py``: what a tool offers.  ``registry.py``: kinds -> tools, and ``run_probe``.
``result.py``: one run's result.  ``store.py``: results and experiments in SQLite.
``sampler.py`` with ``parsers.py``: host counters and per-flow state while a probe runs.
"""
