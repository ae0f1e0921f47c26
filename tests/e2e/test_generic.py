"""GenericJob end to end (no torch): replicas reach each other at their substituted
$(service.<type>[<rank>].host):$(service.port[<name>]) addresses, all on the same port."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from .kit import SCRIPTS, free_port, run_local

pytestmark = pytest.mark.e2e


def test_replicas_talk_through_substituted_service_addresses(tmp_path: Path, tag: str) -> None:
    run = run_local(tmp_path, f"""
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: GenericJob
        metadata:
          name: talk
        spec:
          service:
            ports:
              - name: greet
                port: {free_port()}
          replicaSpecs:
            - type: worker
              replicas: 3
              restartPolicy:
                policy: Never
              template:
                spec:
                  containers:
                    - name: peer
                      image: python:3.12-slim
                      command:
                        - {sys.executable}
                        - {SCRIPTS / 'peers.py'}
                        - $(rank)
                        - $(service.port[greet])
                        - $(service.worker[0].host)
                        - $(service.worker[1].host)
                        - $(service.worker[2].host)
        """, tag=tag, timeout=60)
    assert run.code == 0, run.explain()
    for me, peer in (("127.0.1.2", "127.0.1.1"), ("127.0.1.1", "127.0.1.3"), ("127.0.1.3", "127.0.1.2")):
        assert f"{me} -> {peer}: {peer} got hello from {me}" in run.stdout, run.explain()
    assert "[talk-worker-2] 127.0.1.3 -> 127.0.1.1" in run.stdout
    assert "GenericJob talk Succeeded" in run.stderr
