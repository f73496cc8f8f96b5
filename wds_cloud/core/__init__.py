"""The tar-sample streaming engine: no torch, no cloud SDK imports."""
