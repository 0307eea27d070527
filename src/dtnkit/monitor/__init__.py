"""Monitoring: Prometheus collectors for what node_exporter does not export, the exporter,
the textfile writer and the shipped alert rules (docs/monitoring.md)."""
