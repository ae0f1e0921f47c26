"""A simulated cluster: what the tests and `flatjob run-local` run the runtime against.

Nothing here runs in a cluster, and the runtime's own modules (runtime/*.py, decisions/)
never import it (tests/test_layering.py).  Each piece stands in for a real component and
says, with the Kubernetes source for each rule, what it emulates and what it does not:
- apiserver/: kube-apiserver's storage and rules (objects, pods, custom resources, quota,
  garbage collection, watches), served in-process by cluster.py and over HTTP by server.py;
- kubelet.py: the scheduler's binding, and the kubelet's pod lifecycle in the real order;
- podstatus.py: a pod's status as a kubelet writes it, shared by the scenario kubelet and
  run-local's (runtime/local/kubelet.py, which runs real processes).
"""
