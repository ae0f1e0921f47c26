"""The fake Kubernetes API server: storage and rules (here), served in-process by runtime.fake
and over HTTP by runtime.fakeserver.  runtime/fake.py's docstring lists every rule emulated."""
