"""Sweeps: a grid of measurement points as data (:mod:`.grid`), the runner that measures
them on a lab path (:mod:`.runner`, with :mod:`.servers`, :mod:`.tools`, :mod:`.sample`),
the stored runs and points (:mod:`.store`) and their analysis (:mod:`.analyze`)."""
