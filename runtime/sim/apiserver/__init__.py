"""The fake Kubernetes API server: storage and rules (here), served in-process by
runtime.sim.cluster and over HTTP by runtime.sim.server.  runtime/sim/cluster.py's docstring
lists every rule emulated."""
