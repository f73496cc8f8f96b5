"""In-process emulators of services that cannot run on a test machine (AIStore)."""
