"""Probes: *what* is measured (net, disk, e2e), each a spec and a tool-neutral summary.

A probe says nothing about *how* it is measured; that is a tool's job
(:mod:`dtnkit.measure.tools`), and :mod:`dtnkit.measure.registry` joins the two.
"""
