"""dtnkit's benchmarks: ``python -m bench`` lists the cases, ``python -m bench CASE`` runs one.

Figures are measured here, never asserted in tests; see bench/README.md."""
