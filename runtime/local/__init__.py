"""`flatjob run-local`: run a compiled job on this machine, one process tree per pod.

The job is compiled by the real pipeline (with loopback addresses), and the runtime's own
pure decisions (runtime.decisions.reconcile) release, restart and finish it; this package
only stands in for the cluster: processes instead of pods, a temp folder instead of
ConfigMap volumes, a table on stderr instead of `kubectl get pods`.  See docs/run-local.md.

Modules, from the edges in: compiling (spec -> LocalJob), addresses, environment, files
(what a container gets), pods (local pod state -> PodState), processes (start, stop, logs),
table (what the user sees), runner (the loop).
"""
