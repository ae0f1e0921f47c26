"""`flatjob run-local`: run a compiled job on this machine, one process tree per pod.

The job is compiled by the real pipeline (with loopback addresses) and applied to a local
API server (the test bed's fake kube-apiserver, in-process, on 127.0.0.1), where the job's
real runtime (runtime.controller over runtime.kube and the `kubernetes` client) creates,
releases, restarts and finishes its pods as in a cluster.  This package stands in for the
rest of the cluster: a kubelet that runs pods as processes, a temp folder instead of
ConfigMap volumes, a table on stderr instead of `kubectl get pods`.  See docs/run-local.md.

Modules, from the edges in: compiling (spec -> LocalJob), addresses, environment, files,
containers (what a container gets and runs), ssh (what an SSH pod gets), processes (start,
stop, logs), podstatus (a kubelet's status documents), kubelet (pods -> processes),
cluster (API server and runtime), table (what the user sees), runner (one run).
"""
