"""Probes (iperf3, fio, transfers), the sampler beside them, and the results store."""
