"""The WAN case's parts: cells (data), the lab and its servers, the tool columns (data), the
tables."""
