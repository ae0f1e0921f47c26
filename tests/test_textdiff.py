"""compiler/textdiff.py: unified diffs matched piece by piece, as YAML nests the lines.

Properties: applying the diff to the old text gives the new one, also when every pair is cut
into pieces (SMALL 1); a small text is diffed exactly as difflib diffs it; a one-argument
change of a 3 000-pod job's PodTemplates gives one small hunk per pod (difflib matched the
whole file: 137 s, review of round 8), and an image bump in each type of a 100-type job.yaml
one hunk per type (25 s, review of round 9).
"""

from __future__ import annotations

import difflib
import re
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st
from propertykit import examples

from flatjob.compiler import textdiff
from flatjob.compiler.textdiff import documents, unified

HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@$")


def apply(a: list[str], diff: list[str]) -> list[str]:
    """The new lines, from the old ones and a unified diff (what `patch` does, strictly)."""
    out: list[str] = []
    at = 0
    for line in diff[2:]:
        m = HUNK.match(line.rstrip("\n"))
        if m:
            start = int(m.group(1)) - (0 if m.group(2) == "0" else 1)
            out += a[at:start]
            at = start
        elif line[0] == " ":
            assert a[at] == line[1:], (at, line)
            out.append(line[1:])
            at += 1
        elif line[0] == "-":
            assert a[at] == line[1:], (at, line)
            at += 1
        else:
            out.append(line[1:])
    return out + a[at:]


LINES = st.sampled_from(["---\n", "kind: PodTemplate\n", "  name: a\n", "  name: b\n", "  args: [--epochs, '10']\n", "x: 1\n", "x: 2\n", "\n",
                         "  - type: w\n", "    image: i:1\n", "    image: i:2\n", "      - a\n"])


@settings(max_examples=examples(300), deadline=None)
@given(a=st.lists(LINES, max_size=40), b=st.lists(LINES, max_size=40))
def test_the_diff_applied_to_the_old_text_gives_the_new_one(a: list[str], b: list[str]) -> None:
    diff = list(unified(a, b, "a/x", "b/x"))
    assert (diff == []) == (a == b)
    assert apply(a, diff) == b


@settings(max_examples=examples(300), deadline=None)
@given(a=st.lists(LINES, max_size=40), b=st.lists(LINES, max_size=40))
def test_a_diff_cut_into_pieces_at_every_level_still_applies(a: list[str], b: list[str]) -> None:
    with mock.patch.object(textdiff, "SMALL", 1):
        diff = list(unified(a, b, "a/x", "b/x"))
    assert (diff == []) == (a == b)
    assert apply(a, diff) == b


@settings(max_examples=examples(200), deadline=None)
@given(a=st.lists(LINES.filter(lambda s: s != "---\n"), max_size=30), b=st.lists(LINES.filter(lambda s: s != "---\n"), max_size=30))
def test_one_document_is_diffed_as_difflib_diffs_it(a: list[str], b: list[str]) -> None:
    assert list(unified(a, b, "a/x", "b/x")) == list(difflib.unified_diff(a, b, "a/x", "b/x"))


def pods(count: int, epochs: str) -> list[str]:
    return [line for i in range(count) for line in (
        "---\n", "apiVersion: v1\n", "kind: PodTemplate\n", "metadata:\n", f"  name: big-worker-{i}\n", "template:\n",
        "  spec:\n", "    containers:\n", "      - name: c\n", "        image: busybox\n", f"        args: [--epochs, '{epochs}']\n",
        "        env:\n", "          - {name: A, value: '1'}\n", "          - {name: B, value: '2'}\n", "    restartPolicy: Never\n")]


def test_one_argument_changed_in_3000_pods_is_a_small_hunk_each() -> None:
    a, b = pods(3000, "10"), pods(3000, "11")
    diff = list(unified(a, b, "a/podtemplates.yaml", "b/podtemplates.yaml"))
    assert sum(1 for line in diff if line.startswith("@@")) == 3000
    assert sum(1 for line in diff if line.startswith("-") and not line.startswith("---")) == 3000
    assert apply(a, diff) == b


def test_documents_start_at_their_separator() -> None:
    assert documents(["a\n", "---\n", "b\n", "---\n"]) == [(0, 1), (1, 3), (3, 4)]
    assert documents(["---\n", "a\n"]) == [(0, 2)]
    assert documents([]) == []


def sweep(image: str, types: int = 100, args: int = 450) -> list[str]:
    """A job.yaml of one document: 100 replica types sharing a 450-item args list."""
    arg_list = ", ".join(f"--opt{i}=v{i}" for i in range(args))
    lines = ["apiVersion: batch.tensorstack.dev/v1beta1\n", "kind: GenericJob\n", "metadata:\n", "  name: sweep\n", "spec:\n", "  replicaSpecs:\n"]
    for k in range(types):
        lines += [f"    - type: t{k}\n", "      replicas: 1\n", "      template:\n", "        spec:\n", "          containers:\n", "            - name: c\n",
                  f"              image: {image}\n", *(f"              - {a}\n" for a in arg_list.split(", ")[:args])]
    return lines


def test_an_image_bump_in_each_type_of_one_big_document_is_a_small_hunk_each() -> None:
    a, b = sweep("img:1"), sweep("img:2")
    diff = list(unified(a, b, "a/job.yaml", "b/job.yaml"))
    assert sum(1 for line in diff if line.startswith("@@")) == 100
    assert apply(a, diff) == b
