"""`flatjob run-local`: run compiled jobs (one, or a folder's) on this machine, one process tree per pod.

The jobs are compiled by the real pipeline (with loopback addresses, a block per job) and
applied to a local API server (the test bed's fake kube-apiserver, in-process, on
127.0.0.1), where their namespace's real runtime (runtime.controller over runtime.kube and
the `kubernetes` client) creates, releases, restarts and finishes their pods as in a
cluster.  This package stands in for the rest of the cluster: a kubelet that runs pods as
processes, a temp folder instead of ConfigMap volumes, a table on stderr instead of
`kubectl get pods`.  See docs/run-local.md.

Modules, from the edges in: compiling (spec -> LocalJob), addresses, environment, files,
containers (what a container gets and runs), ssh (what an SSH pod gets), processes (start,
stop, logs), podstatus (a kubelet's status documents), kubelet (pods -> processes),
cluster (API server and runtime), table (what the user sees), runner (one run).
"""
