"""CPU of runtime.sieve against parsing whole, on a dense record's watch event (1.2-1.4 MB).

    python bench/sieve_cpu.py [--repeat 5]   (flatjob importable: installed, or PYTHONPATH)

For each shape of junk a tenant may write into a record's status (small objects, the shape of
issue 21; objects in objects; arrays in arrays, the sieve's worst: a step a bracket), the best
of `--repeat` runs of: json.loads (and orjson.loads) of the event whole, and sieve.loads with
the record's spec and status lifted (what kube.HttpWatch does with a dense event), then
trim.record of each. Each watch event, list page and write answer of a dense record costs one
such pass; how many come is the tenant's write rate (each update of the record is an event).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import orjson

from flatjob.runtime import nesting, sieve, trim

SHAPES = {
    "small objects [{'a':0}...]": [{"a": 0}] * 160_000,
    "objects in objects [{'a':{'b':0}}...]": [{"a": {"b": 0}}] * 100_000,
    "arrays in arrays [[[0]]...]": [[[0]]] * 200_000,
}


def event(junk: Any) -> bytes:
    rec = {"apiVersion": "flatjob.dev/v1beta1", "kind": "GenericJob", "metadata": {"name": "j", "namespace": "n"},
           "spec": {"replicaSpecs": [{"type": "worker", "replicas": 2, "template": {"spec": {}}}]},
           "status": {"phase": "Running", "runtime": {"attempt": 1}, "x": junk}}
    return json.dumps({"type": "MODIFIED", "object": rec}, separators=(",", ":")).encode()


def best(fn: Any, raw: bytes, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn(raw)
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    select = sieve.members((2,), trim.RECORD_LIFT)
    print(f"{'junk in status':40} {'MB':>5} {'json.loads':>10} {'orjson':>8} {'sieve':>8} {'sieve/json':>10}  {'+trim: whole':>12} {'sieved':>8}")
    for name, junk in SHAPES.items():
        raw = event(junk)
        whole = best(json.loads, raw, args.repeat)
        fast = best(orjson.loads, raw, args.repeat)
        sieved = best(lambda r: sieve.loads(r, select), raw, args.repeat)
        whole_trim = best(lambda r: trim.record(nesting.loads(r)["object"]), raw, args.repeat)
        sieved_trim = best(lambda r: trim.record(sieve.loads(r, select)["object"]), raw, args.repeat)
        print(f"{name:40} {len(raw) / 1e6:5.2f} {whole:10.3f} {fast:8.3f} {sieved:8.3f} {sieved / whole:10.1f}x {whole_trim:12.3f} {sieved_trim:8.3f}")


if __name__ == "__main__":
    main()
