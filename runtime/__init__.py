"""flatjob runtime: the per-job in-cluster controller (release, restart, resize, status)."""
