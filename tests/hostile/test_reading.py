"""Hostile input files: bombs, depth, size, links and non-text, at every entry point.

Each case runs lint, compile, krm (the file as stdin) and the Argo CD plugin in a capped
child (tests/hostile/kit.py: 1 GiB of address space, 30 CPU seconds) and asserts the exit
code, the diagnostic's code and line:col, that nothing outside the output folder changed,
and that the run took well under the caps.  Before the reading limits, the bombs below hit
a 6 GB cap after about a minute, depth 100 000 was a segfault, a recursive alias an
internal error.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from flatjob.compiler.limits import DEFAULT, RUN_SPLIT_HINT

from .kit import (
    BOUNDED_CPU,
    JOB,
    MEASURED,
    SECRET,
    TOKEN,
    Sandbox,
    assert_clean_exit,
    flatjob,
    resource_list,
    run,
    script,
)

CPU_BUDGET = BOUNDED_CPU  # seconds of CPU per run, start-up included


def alias_bomb() -> tuple[str, tuple[int, int]]:
    """9 aliases of 9 aliases...: 460 bytes that ask for 9**9 nodes, and where reading stops:
    at the first alias whose copy would take the file past the node limit."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    total, size = 1 + 1 + 10, 10  # the document's mapping, key a0, its list of 9
    for i in range(1, 10):
        total += 2  # key a<i> and its list
        for j in range(9):
            if total + size > DEFAULT.file_nodes:
                return "\n".join(lines) + "\n", (i + 1, lines[i].index(f"*a{i - 1}") + 1 + j * len(f"*a{i - 1}, "))
            total += size
        size = 1 + 9 * size
    raise AssertionError("the bomb fits the limit")


def merge_bomb() -> str:
    """`<<` merges that double at every level."""
    lines = ["m0: &m0 {k0: v, k1: v}"]
    lines += [f"m{i}: &m{i} {{<<: [*m{i - 1}], x{i}: *m{i - 1}, y{i}: *m{i - 1}}}" for i in range(1, 40)]
    return "\n".join(lines) + "\n"


def deep_flow(depth: int) -> str:
    return "[" * depth + "]" * depth + "\n"


def deep_block(depth: int) -> str:
    return "".join("  " * i + "k:\n" for i in range(depth)) + "  " * depth + "v: 1\n"


# Where flatjob's depth limit (100) is crossed, or where the YAML library's own limit stopped
# scanning ahead first (libyaml in PyYAML 6.0.4: 1000 levels): FJ105 either way.
DEEP_FLOW_COLUMNS = (101, 1001)

BOMBS = {
    # name: (file text, expected (line, col) or None when only the code is pinned; col may be
    # a tuple of the columns the allowed YAML library versions report)
    "alias-bomb": (alias_bomb()[0], alias_bomb()[1]),
    "merge-bomb": (merge_bomb(), None),
    "depth-100000": (deep_flow(100_000), (1, DEEP_FLOW_COLUMNS)),
    "depth-500-block": (deep_block(500), (101, 201)),
    "flow-list-5MiB": ("[" + "1," * (5 * 1024 * 1024 // 2) + "1]\n", (1, 4 * 1024 * 1024 + 1)),
}


def _check(run_: object, box: Sandbox, where: tuple[int, int] | None, file: str, code: str = "FJ105") -> None:
    assert_clean_exit(run_, 1)  # type: ignore[arg-type]
    found = [f for f in run_.findings() if f[4] == code]  # type: ignore[attr-defined]
    assert found, run_.output[-2000:]  # type: ignore[attr-defined]
    if where is not None:
        assert (found[0][0], found[0][1]) == (file, where[0])
        assert found[0][2] in _columns(where[1])
    assert run_.cpu < CPU_BUDGET, run_.cpu  # type: ignore[attr-defined]
    assert box.untouched()
    assert not box.out.exists()


def _columns(col: int | tuple[int, ...]) -> tuple[int, ...]:
    return col if isinstance(col, tuple) else (col,)


@pytest.mark.parametrize("name", list(BOMBS))
def test_a_bomb_in_a_job_file_stops_lint_and_compile(box: Sandbox, name: str) -> None:
    text, where = BOMBS[name]
    prefix = JOB.format(name="bombed") + "---\n"
    box.job()
    box.job(file="bomb.yaml", text=prefix + text)
    box.freeze()
    if where is not None:  # after the job document; a size limit counts its bytes too
        shift = len(prefix) if name.startswith("flow-list") else 0
        where = (where[0] + prefix.count("\n"), tuple(c - shift for c in _columns(where[1])))
    _check(box.flatjob("lint", "jobs"), box, where, "bomb.yaml")
    _check(box.compile(), box, where, "bomb.yaml")


@pytest.mark.parametrize("name", ["alias-bomb", "merge-bomb", "depth-100000"])
def test_a_bomb_next_to_a_job_fails_lint_diff_and_the_plugin(box: Sandbox, name: str) -> None:
    """A file that holds no job is read too (it might): its bomb is an error, not '0 errors'."""
    text, where = BOMBS[name]
    box.job()
    (box.jobs / "values.yaml").write_text(text)
    box.freeze()
    _check(box.flatjob("lint", "jobs"), box, where, "values.yaml")
    _check(box.flatjob("diff", "jobs", "-o", "rendered"), box, where, "values.yaml")
    plugin = box.plugin(SOURCES="jobs")
    _check(plugin, box, where, "values.yaml")
    assert plugin.stdout == ""


@MEASURED
@pytest.mark.parametrize("name", list(BOMBS))
def test_a_bomb_on_krm_stdin_is_a_result(box: Sandbox, name: str) -> None:
    text, where = BOMBS[name]
    box.freeze()
    run_ = box.flatjob("krm", stdin=text.encode())
    assert_clean_exit(run_, 1)
    assert "[FJ105]" in run_.stdout and "severity: error" in run_.stdout
    if where is not None:
        assert any(f"<stdin>:{where[0]}:{col}:" in run_.stdout for col in _columns(where[1]))
    assert run_.cpu < CPU_BUDGET and box.untouched()


def test_a_recursive_alias_is_a_diagnostic(box: Sandbox) -> None:
    box.job(file="rec.yaml", text=JOB.format(name="rec").replace("spec:\n", "spec:\n  x: &r [1, *r]\n", 1))
    box.freeze()
    for args in (("lint", "jobs"), ("compile", "jobs", "-o", "rendered")):
        run_ = box.flatjob(*args)
        assert_clean_exit(run_, 1)
        assert ("rec.yaml", 6, 13, "error", "FJ104") in run_.findings()
    assert box.untouched()


def test_tags_on_mappings_are_refused(box: Sandbox) -> None:
    box.job(file="tag.yaml", text=JOB.format(name="tag").replace("spec:\n", "spec: !!omap\n", 1).replace("      template:\n", "      template: !custom\n"))
    box.freeze()
    run_ = box.flatjob("lint", "jobs")
    assert_clean_exit(run_, 1)
    assert {(f[1], f[4]) for f in run_.findings()} >= {(5, "FJ104"), (9, "FJ104")}


def test_a_job_asking_for_a_billion_pods(box: Sandbox) -> None:
    box.job(file="big.yaml", text=JOB.format(name="big").replace("replicas: 2", "replicas: 1000000000"))
    box.freeze()
    for args in (("lint", "jobs"), ("compile", "jobs", "-o", "rendered")):
        run_ = box.flatjob(*args)
        _check(run_, box, (8, 17), "big.yaml")


# --- links and files that are not text ----------------------------------------------------


LINKS = {
    "dev-zero": "/dev/zero",
    "proc-environ": "/proc/self/environ",
    "git-config": "../.git/config",
    "outside": "../../outside/secret.txt",
}


@MEASURED
@pytest.mark.parametrize("target", list(LINKS))
def test_a_link_leaving_the_folder_is_skipped_with_a_warning(box: Sandbox, target: str) -> None:
    box.job()
    os.symlink(LINKS[target], box.jobs / "linked.yaml")
    box.freeze()
    for run_ in (box.flatjob("lint", "jobs"), box.compile()):
        assert_clean_exit(run_, 0)
        assert "linked.yaml: warning: skipped: a symbolic link that leads outside jobs" in run_.output and "[FJ106]" in run_.output
        assert SECRET not in run_.output and TOKEN not in run_.output
        assert run_.cpu < CPU_BUDGET
    assert box.untouched()
    plugin = box.plugin(SOURCES="jobs")
    assert_clean_exit(plugin, 0)
    assert SECRET not in plugin.output and TOKEN not in plugin.output


@pytest.mark.parametrize("target", ["/proc/self/environ", ".git/config", "../outside/secret.txt"])
def test_a_named_link_leaving_the_working_directory_is_skipped(box: Sandbox, target: str) -> None:
    """A link named on the command line (pre-commit with pass_filenames names the changed
    files) is not followed out of the repository, nor into a hidden folder of it; and a file
    named must hold a job, so that is an error, not a pass with 0 jobs checked (hx37)."""
    os.symlink(target, box.repo / "named.yaml")
    box.freeze()
    run_ = box.flatjob("lint", "named.yaml")
    assert_clean_exit(run_, 1)
    assert "named.yaml: error: not read:" in run_.output and "[FJ106]" in run_.output
    assert SECRET not in run_.output and TOKEN not in run_.output


def test_a_named_non_text_file_never_prints_its_content(box: Sandbox) -> None:
    """An absolute path is the caller's: read, but a line with control characters is never quoted."""
    box.freeze()
    run_ = box.flatjob("lint", "/proc/self/environ")
    assert_clean_exit(run_, 1)
    assert [f[4] for f in run_.findings()] == ["FJ100"]
    assert SECRET not in run_.output and "CANARY" not in run_.output


def test_a_fifo_is_not_read(box: Sandbox) -> None:
    box.job()
    os.mkfifo(box.jobs / "pipe.yaml")
    box.freeze()
    run_ = box.flatjob("lint", "jobs")
    assert_clean_exit(run_, 1)
    assert "pipe.yaml: error: is not a regular file" in run_.output and run_.seconds < 30


def test_a_control_character_line_is_not_quoted(box: Sandbox) -> None:
    box.job(file="ctl.yaml", text=JOB.format(name="ctl").replace("kind: PyTorchTrainingJob", f"kind: PyTorch\x1b]0;{SECRET}\x07Job"))
    box.freeze()
    run_ = box.flatjob("lint", "jobs")
    assert_clean_exit(run_, 1)
    assert run_.findings()[0][1:3] == (2, 14) and SECRET not in run_.output and "\x1b" not in run_.output


def test_a_file_name_that_is_not_utf8_is_shown_escaped(box: Sandbox) -> None:
    """0x9b is an 8-bit CSI: a name's bytes that are not UTF-8 are written as `\\xNN`, never raw
    (review 21, round 3: they arrived as surrogates and went out as the original bytes)."""
    name = b"a\x9b31mred\x9b0m.yaml"
    with open(os.path.join(os.fsencode(box.jobs), name), "wb") as f:
        f.write(JOB.format(name="ctl").replace("kind: PyTorchTrainingJob", "kind: PyTorchJob").encode())
    run_ = box.flatjob("lint", "jobs")
    assert_clean_exit(run_, 1)
    assert "a\\x9b31mred\\x9b0m.yaml:2:7: error:" in run_.output and "\ufffd" not in run_.output, run_.output


# hx13: a name's bytes that are not UTF-8 also reach the output where a message names another
#    file (FJ315 "also defined in ...") and in JSON's and SARIF's path: written back raw (an 8-bit
#    CSI on a terminal, invalid UTF-8 in the JSON), or, on a strict UTF-8 stream (a UTF-8 locale's
#    stdout; flatjob-ci's --sarif file), an internal error (exit 3).
@pytest.mark.parametrize("strict", [False, True], ids=["c-utf8", "strict-utf8"])
@pytest.mark.parametrize("fmt", ["text", "json", "github", "sarif"])
def test_a_name_that_is_not_utf8_is_escaped_in_every_format_and_message(box: Sandbox, fmt: str, strict: bool) -> None:
    with open(os.path.join(os.fsencode(box.jobs), b"a\x9b31m\xff.yaml"), "wb") as f:
        f.write(JOB.format(name="x").encode())
    box.job(file="b.yaml", text=JOB.format(name="x"))
    env = {"PYTHONIOENCODING": "utf-8:strict"} if strict else None
    run_ = run([sys.executable, "-m", "flatjob.compiler.cli", "lint", "--format", fmt, "jobs"], box.repo, env=env)
    assert_clean_exit(run_, 1)
    assert "FJ315" in run_.output and "a\\x9b31m\\xff.yaml" in run_.output.replace("\\\\", "\\"), run_.output[-2000:]
    assert "\ufffd" not in run_.output and "\x9b" not in run_.output, run_.output[-2000:]  # no raw byte (decoded as U+FFFD)


def test_flatjob_ci_writes_sarif_for_a_name_that_is_not_utf8(box: Sandbox) -> None:
    with open(os.path.join(os.fsencode(box.jobs), b"c\x9b31m.yaml"), "wb") as f:
        f.write(b"apiVersion: batch.tensorstack.dev/v1beta1\nkind: PyTorchJob\n")
    sarif = box.tmp / "flatjob.sarif"
    done = run([script("flatjob-ci"), "--jobs", "jobs", "--overlays", "overlays", "--rendered", "rendered", "--sarif", str(sarif)], box.repo)
    assert_clean_exit(done, 1)
    assert "c\\x9b31m.yaml" in json.loads(sarif.read_bytes())["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]


def test_a_file_too_big_for_the_run_is_reported_where_reading_stopped(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text("# padding\n" * 500_000)  # 5 MB of comments: no node, only bytes
    run_ = flatjob("lint", str(big), cwd=tmp_path)
    assert_clean_exit(run_, 1)
    cap = 4 * 1024 * 1024
    assert run_.findings() == [("big.yaml", cap // 10 + 1, cap % 10 + 1, "error", "FJ105")]


# --- merges, documents: every node a file asks for counts (issue 21) ------------------------

ROUND_TWO_CPU = BOUNDED_CPU
ROUND_TWO_MIB = 100  # peak resident memory of the run


def _merge_list(count: int) -> str:
    """A `<<` list of `count` aliases: 3.6 MB for 900 000 (each alias copied nothing new)."""
    return "a: &a {x: 1}\nb:\n  <<: [" + ", ".join(["*a"] * count) + "]\n"


def _merge_inline(size: int) -> str:
    """An inline `<<` mapping of as many keys as fit in `size` bytes."""
    keys, used, i = [], 10, 0
    while used < size:
        keys.append(f"k{i}: 1")
        used += len(keys[-1]) + 2
        i += 1
    return "b:\n  <<: {" + ", ".join(keys) + "}\n"


def _merge_overridden(sources: int) -> str:
    """A mapping merging one 1000-key anchor `sources` times: pairs read, none of them built."""
    keys = ", ".join(f"k{i}: 1" for i in range(1000))
    return f"a: &a {{{keys}}}\nb:\n  <<: [" + ", ".join(["*a"] * sources) + "]\n"


ROUND_TWO = {
    # name: (file text, line of the FJ105)
    "merge-list-900000-aliases": (_merge_list(900_000), 3),
    "merge-inline-4MiB": (_merge_inline(4 * 1024 * 1024 - 64), 2),
    "merge-40000-overridden-sources": (_merge_overridden(40_000), 3),
    "empty-documents-1000000": ("---\n" * 1_000_000, DEFAULT.file_documents + 1),
}


@MEASURED
@pytest.mark.parametrize("name", list(ROUND_TWO))
def test_merges_and_documents_stop_in_a_second_and_100_mib(box: Sandbox, name: str) -> None:
    """Before: the merge list was read whole (exit 0 after 6 s, 337 MiB), the inline merge
    took 36 s and 990 MiB (a MemoryError under a 600 MB cap), the documents 1.7 s and 140 MiB."""
    text, line = ROUND_TWO[name]
    box.job()
    (box.jobs / "bomb.yaml").write_text(text)
    box.freeze()
    for run_ in (box.flatjob("lint", "jobs"), box.compile(), box.plugin(SOURCES="jobs")):
        assert_clean_exit(run_, 1)
        found = [f for f in run_.findings() if f[4] == "FJ105"]
        assert found and found[0][:2] == ("bomb.yaml", line), run_.output[-2000:]
        assert run_.cpu < ROUND_TWO_CPU and run_.rss_mib < ROUND_TWO_MIB, (run_.cpu, run_.rss_mib)
    assert box.untouched() and not box.out.exists()


@MEASURED
def test_fifteen_files_of_empty_documents_stop_at_the_run_limit(box: Sandbox) -> None:
    """Before: 10.7 s and 309 MiB (each file's text kept, each file's million lines indexed)."""
    for i in range(15):
        (box.jobs / f"empty{i:02d}.yaml").write_text("---\n" * 1_000_000)
    box.freeze()
    run_ = box.flatjob("lint", "jobs")
    assert_clean_exit(run_, 1)
    messages = {m for m in run_.output.splitlines() if "[FJ105]" in m}
    assert any(f"more than {DEFAULT.run_documents:,} YAML documents" in m for m in messages), run_.output[-2000:]
    assert run_.cpu < ROUND_TWO_CPU and run_.rss_mib < ROUND_TWO_MIB, (run_.cpu, run_.rss_mib)


ENV_ITEMS = "              env:\n" + "".join(f"                - {{name: E{i}, value: v}}\n" for i in range(9_000))


@MEASURED
@pytest.mark.parametrize("files, items", [(25, ENV_ITEMS), (20, ENV_ITEMS * 2)], ids=["each-under-its-file-limit", "each-over-its-file-limit"])
def test_many_files_of_many_nodes_stop_at_the_run_limit_unchecked(box: Sandbox, files: int, items: str) -> None:
    """Before (hx34): 25 files of 45 000 nodes (11 MB, each under the file limit, together past
    the run's 1 000 000) took lint 21 s and 383 MiB, compile 4 s and the plugin 16.6 s before
    FJ105, every job read being checked first; 20 files each past its own limit took lint 5 s.
    The run limit is now what reading and checking cost within the bound, a run refused at it
    checks none of what it read, and the cyclic collector no longer rescans every node read."""
    for i in range(files):
        box.job(f"j{i}", text=JOB.format(name=f"j{i}").replace("replicas: 2", "replicas: 1").replace("              command: [python, train.py]\n", "              command: [python, train.py]\n" + items), file=f"j{i:02d}.yaml")
    box.freeze()
    for run_ in (box.flatjob("lint", "jobs"), box.compile(), box.plugin(SOURCES="jobs")):
        assert_clean_exit(run_, 1)
        assert f"more than {DEFAULT.run_nodes:,} YAML nodes in the files of this run together" in run_.output, run_.output[-2000:]
        # Said once, with what to do: no FJ105 for each file left, none of them is read.
        assert run_.output.count("this run together") == 1 and RUN_SPLIT_HINT in run_.output, run_.output[-2000:]
        assert not {"FJ202", "FJ404", "FJ201"} & run_.codes(), run_.output[-2000:]
        assert run_.cpu < ROUND_TWO_CPU and run_.rss_mib < ROUND_TWO_MIB, (run_.cpu, run_.rss_mib)
    assert box.untouched() and not box.out.exists()


@pytest.mark.slow  # 30 000 files written and read
def test_thirty_thousand_empty_files_stop_at_the_run_limit(box: Sandbox) -> None:
    """Empty files hold no document and no byte, but each costs an open and a parse: 100 000
    took lint 4.5 s before files per run were counted."""
    box.job()
    for i in range(30_000):
        (box.jobs / f"e{i:05d}.yaml").touch()
    box.freeze()
    for run_ in (box.flatjob("lint", "jobs"), box.compile(), box.plugin(SOURCES="jobs")):
        assert_clean_exit(run_, 1)
        assert f"more than {DEFAULT.run_files:,} files to read in one run" in run_.output, run_.output[-2000:]
        assert run_.cpu < ROUND_TWO_CPU and run_.rss_mib < ROUND_TWO_MIB, (run_.cpu, run_.rss_mib)
    assert box.untouched() and not box.out.exists()


@MEASURED
def test_merges_of_merges_nest_at_most_the_depth_limit(box: Sandbox) -> None:
    """A chain of anchors each merging the one before, first built where its merges are not
    applied (the values of a duplicate key), then used: resolving it would recurse 5000 deep."""
    lines = ["x: 1", "x: &m0 {k0: v}", *(f"x: &m{i} {{<<: *m{i - 1}, k{i}: v}}" for i in range(1, 5000)), "y: *m4999"]
    box.job(file="chain.yaml", text="\n".join(lines) + "\n")
    box.freeze()
    run_ = box.flatjob("lint", "jobs")
    assert_clean_exit(run_, 1)
    assert "FJ105" in run_.codes() and run_.cpu < ROUND_TWO_CPU


# --- findings made again on each alias replay (issue 21, round four) -------------------------------

_HEAD = "apiVersion: batch.tensorstack.dev/v1beta1\nkind: PyTorchTrainingJob\nmetadata:\n  name: x\n"
MB = 1_000_000

REPLAYED = {
    # name: (file text, the finding's code): each finding is on a node an alias replays thousands of times
    "duplicate-1MB-key-20000-times": (_HEAD + "  labels:\n    ? &k " + "A" * MB + "\n    : v\n" + "    *k : v\n" * 20_000, "FJ101"),
    "bad-bool-on-a-1MB-line-20000-times": (_HEAD + "spec:\n  a: &a !!bool x   #" + "C" * MB + "\n  b: [" + ", ".join(["*a"] * 20_000) + "]\n", "FJ104"),
    "1MB-tag-3000-times": (_HEAD + "spec:\n  a: &a !<tag:" + "T" * MB + "> x\n  b: [" + ", ".join(["*a"] * 3_000) + "]\n", "FJ104"),
}


@MEASURED
@pytest.mark.parametrize("name", list(REPLAYED))
def test_a_finding_an_alias_replays_is_made_once_and_quotes_little(box: Sandbox, name: str) -> None:
    """Before: each replay built the finding again, each holding the 1 MB line or key: a
    MemoryError (exit 3) after 11-21 s at a 2 GB cap in lint, compile, krm and the plugin."""
    text, code = REPLAYED[name]
    (box.jobs / "job.yaml").write_text(text)
    box.freeze()
    for run_ in (box.flatjob("lint", "jobs"), box.compile(), box.plugin(SOURCES="jobs"), box.flatjob("krm", stdin=text.encode())):
        assert_clean_exit(run_, 1)
        assert f"[{code}]" in run_.output, run_.output[-2000:]
        assert run_.cpu < ROUND_TWO_CPU and run_.rss_mib < ROUND_TWO_MIB, (run_.cpu, run_.rss_mib)
        assert len(run_.output) < 20_000  # the 1 MB text is quoted in a window, never whole
    assert box.untouched() and not box.out.exists()


# %TAG directives (review of round 12): libyaml checks each new handle against every earlier one (quadratic),
#    all inside the first DocumentStartEvent, before flatjob counts a node.
TAGS = 50_000  # 1.2 MB, well under the 4 MiB file limit


def _directives(n: int = TAGS) -> str:
    return "".join(f"%TAG !t{i}! tag:x,2000:\n" for i in range(n)) + "---\n"


@MEASURED
@pytest.mark.parametrize("entry", ["lint", "compile", "plugin", "krm"])
def test_many_tag_directives_are_stopped_within_the_bound(box: Sandbox, entry: str) -> None:
    box.job(text=_directives() + JOB.format(name="x"), file="x.yaml")
    box.freeze()
    if entry == "lint":
        run_ = box.flatjob("lint", "jobs")
    elif entry == "compile":
        run_ = box.compile()
    elif entry == "plugin":
        run_ = box.plugin(SOURCES="jobs")
    else:
        run_ = box.flatjob("krm", stdin=_directives().encode() + resource_list(JOB.format(name="x")).removeprefix(b"---\n"))
    assert_clean_exit(run_, 1, 2)
    assert run_.cpu < ROUND_TWO_CPU and run_.rss_mib < ROUND_TWO_MIB, (run_.cpu, run_.rss_mib)
    if entry == "krm":  # a ResourceList's result
        assert "FJ105" in run_.stdout and "YAML directives" in run_.stdout, run_.output[-1500:]
    else:  # FJ105 at the directive past the limit
        assert "FJ105" in run_.codes() and "more than 100 YAML directives" in run_.output, run_.output[-1500:]
    assert box.untouched()


# The %TAG count (review of round 13) looks for `%` after "\n" only; libyaml also breaks lines at a lone
#    CR, NEL (U+0085), LS (U+2028) and PS (U+2029), so the same 50 000 directives pass uncounted.
def _directives_split(sep: str, n: int = 50_000) -> str:
    return "".join(f"%TAG !t{i}! tag:x,2000:{sep}" for i in range(n)) + "---\n"


@MEASURED
@pytest.mark.parametrize("sep", ["\r", "\x85", "\u2028"], ids=["CR", "NEL", "LS"])
@pytest.mark.parametrize("entry", ["lint", "krm"])
def test_tag_directives_on_other_line_breaks_are_counted(box: Sandbox, sep: str, entry: str) -> None:
    if entry == "lint":
        box.job(text=_directives_split(sep) + JOB.format(name="x"), file="x.yaml")
        box.freeze()
        run_ = box.flatjob("lint", "jobs")
    else:
        box.freeze()
        run_ = box.flatjob("krm", stdin=_directives_split(sep).encode() + resource_list(JOB.format(name="x")))
    assert_clean_exit(run_, 1, 2)
    assert run_.cpu < ROUND_TWO_CPU and run_.rss_mib < ROUND_TWO_MIB, (run_.cpu, run_.rss_mib)
    assert "FJ105" in (run_.stdout if entry == "krm" else " ".join(run_.codes())), run_.output[-1500:]
    assert box.untouched()
