"""Sweeps: a grid of measurement points as data (:mod:`.grid`) and the analysis of stored
points (:mod:`.analyze`).  Both are pure; the runner that measures points comes later."""
