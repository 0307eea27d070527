"""The kinds of settings dtnkit reads and writes, one module per kind (or family of kinds).

Each kind declares once how it reads and writes its value (a file, or the argv of a command),
and that one declaration serves audit, apply, verify, restore and persist.  The registry of
kinds by key prefix is :mod:`dtnkit.tune.registry`.
"""
