"""Runtime: compiled executables (feeds checking, per-binding plans, run / run_async)."""
