"""Name the layer that binds (diagnose) and keep only the tuning that helps (experiment)."""
