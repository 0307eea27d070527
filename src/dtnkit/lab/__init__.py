"""Emulated WAN paths between network namespaces."""
