"""The same error handling at every entry point, and an empty source that refuses to prune.

Covers: krm given bytes that are not UTF-8, `items: 5`, `items: "abc"`, an item that is not
a resource or a functionConfig that is not one answers with results and exit 1 (before: a
crash, or wrong output and exit 0); the Argo CD plugin refuses sources outside the
repository, whether they exist or not (before issue 21's last round it said "not found" for
a missing one, telling what exists on the repo-server), and option values that are not names (exit 2), and an Application whose sources
hold no job (exit 1, unless ALLOW_EMPTY), with one line on stderr and never a traceback;
`flatjob compile` of an empty folder over rendered jobs refuses to prune them (FJ703) unless
--allow-empty (before: exit 0, and Flux's prune deleted every job).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from .kit import JOB, SECRET, TOKEN, Sandbox, assert_clean_exit, resource_list

RL = "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\n"


@pytest.mark.parametrize(
    ("stdin", "message"),
    [
        (RL.encode() + b"items: [\xff\xfe]\n", "<stdin>:3:9: not UTF-8 text"),
        ((RL + "items: 5\n").encode(), "items must be a list of resources, not a number"),
        ((RL + 'items: "abc"\n').encode(), "items must be a list of resources, not a string"),
        ((RL + "items: [5, {kind: ConfigMap}]\n").encode(), "items[0] must be a resource (a mapping), not a number"),
        ((RL + "items: []\nfunctionConfig: [x]\n").encode(), "functionConfig must be a resource (a mapping), not a list"),
        ((RL + "items: []\nfunctionConfig: {kind: ConfigMap, data: {namespace: ../x}}\n").encode(), "namespace '../x' must consist of"),
        ((RL + "items: []\nfunctionConfig: {kind: ConfigMap, data: {namespace: [a]}}\n").encode(), "functionConfig option 'namespace' must be a string"),
        (b"\x00" * 10, "unacceptable character #x0000"),
        (b"", "stdin must hold one ResourceList"),
    ],
    ids=["not-utf8", "items-number", "items-string", "item-not-a-resource", "config-not-a-resource", "namespace-path", "option-not-a-string", "binary", "empty"],
)
def test_krm_reports_a_bad_resource_list_in_results(box: Sandbox, stdin: bytes, message: str) -> None:
    run_ = box.flatjob("krm", stdin=stdin)
    assert_clean_exit(run_, 1)
    out = yaml.safe_load(run_.stdout)
    assert out["kind"] == "ResourceList" and out["results"][0]["severity"] == "error"
    assert any(message in r["message"] for r in out["results"]), out["results"]
    assert run_.stderr == ""


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"SOURCES": "../outside"}, "is outside the repository"),
        ({"SOURCES": "/etc"}, "is outside the repository"),
        ({"SOURCES": "/etc/flatjob-no-such-file"}, "is outside the repository"),  # before: "not found", so the answer told what exists there
        ({"SOURCES": "../no-such-folder"}, "is outside the repository"),
        ({"SOURCES": "jobs", "OVERLAY": "../outside"}, "is outside the repository"),
        ({"SOURCES": "jobs", "NAMESPACE": "../x"}, "ARGOCD_ENV_NAMESPACE='../x' must consist of"),
        ({"SOURCES": "jobs", "CLUSTER_DOMAIN": "a b"}, "ARGOCD_ENV_CLUSTER_DOMAIN='a b' must consist of"),
        # hx13: a file of the checkout's .git named as a source was read, and its FJ100 quoted the
        # token line of .git/config; a missing source's name printed its escape sequences raw
        ({"SOURCES": ".git/config"}, "is in a hidden folder of the repository"),
        ({"SOURCES": "jobs", "OVERLAY": ".git"}, "is in a hidden folder of the repository"),
        ({"SOURCES": "jobs/../.git/config"}, "is in a hidden folder of the repository"),
        ({"SOURCES": "\x1b]52;c;aGk=\x07"}, "not found (relative to"),
    ],
    ids=["parent", "absolute", "absolute-missing", "parent-missing", "overlay", "namespace", "cluster-domain", "git-config", "git-overlay", "git-config-dotdot", "escapes"],
)
def test_plugin_usage_errors(box: Sandbox, settings: dict[str, str], message: str) -> None:
    box.job()
    box.freeze()
    run_ = box.plugin(**settings)
    assert_clean_exit(run_, 2)
    assert run_.stdout == "" and message in run_.stderr and len(run_.stderr.splitlines()) == 1
    assert SECRET not in run_.output and TOKEN not in run_.output and "\x1b" not in run_.output and box.untouched()


def test_plugin_refuses_to_generate_nothing(box: Sandbox) -> None:
    run_ = box.plugin(SOURCES="jobs")
    assert_clean_exit(run_, 1)
    assert run_.stdout == "" and "[FJ703]" in run_.stderr and "ALLOW_EMPTY" in run_.stderr
    allowed = box.plugin(SOURCES="jobs", ALLOW_EMPTY="true")
    assert_clean_exit(allowed, 0)
    assert allowed.stdout == ""


def test_compile_of_an_empty_source_refuses_to_prune(box: Sandbox) -> None:
    box.job("alpha")
    box.job("beta")
    assert_clean_exit(box.compile(), 0)
    for p in box.jobs.iterdir():
        p.unlink()
    box.freeze()
    before = sorted(p.relative_to(box.out).as_posix() for p in box.out.rglob("*"))
    run_ = box.compile()
    assert_clean_exit(run_, 1)
    assert "rendered: error: the sources hold no job" in run_.output and "[FJ703]" in run_.output and "--allow-empty" in run_.output
    assert sorted(p.relative_to(box.out).as_posix() for p in box.out.rglob("*")) == before
    assert_clean_exit(box.compile("--allow-empty"), 0)
    assert sorted(p.name for p in box.out.iterdir()) == ["flatjob-meta.json", "kustomization.yaml"]
    assert box.untouched()


@pytest.mark.parametrize("path", ["../../etc/job.yaml", "/etc/job.yaml", "a/../../job.yaml"])
def test_krm_renders_inside_the_package_whatever_an_item_claims(box: Sandbox, path: str) -> None:
    job = box.job().read_text().replace("metadata:\n", f"metadata:\n  annotations: {{internal.config.kubernetes.io/path: '{path}'}}\n", 1)
    run_ = box.flatjob("krm", stdin=resource_list(job))
    assert_clean_exit(run_, 0)
    paths = [d["metadata"]["annotations"]["internal.config.kubernetes.io/path"] for d in yaml.safe_load(run_.stdout)["items"]]
    assert paths and all(not p.startswith("/") and ".." not in p.split("/") for p in paths), paths


@pytest.mark.parametrize("value", [".inf", "-.inf"])
def test_krm_index_annotation_infinity_gives_a_resource_list(box: Sandbox, value: str) -> None:
    job = JOB.format(name="a").replace("metadata:\n  name: a\n", f"metadata:\n  name: a\n  annotations:\n    config.kubernetes.io/index: {value}\n")
    r = box.flatjob("krm", stdin=resource_list(job))
    assert_clean_exit(r, 0, 1)  # exit 3 before, with nothing on stdout (review 21, round 10)
    assert "kind: ResourceList" in r.stdout


def test_plugin_looks_at_nothing_outside_the_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Containment is decided (links resolved) before whether the path exists is asked, in the
    same words either way, so whether a path outside exists never shapes the answer (hx7:
    /nonexistent said "not found", /etc/shadow "outside the repository"); a link inside that
    leads out is refused the same way; a path through a linked ancestor of the repository is in."""
    from flatjob.compiler import cmp

    repo = tmp_path / "repo"
    (repo / "jobs").mkdir(parents=True)
    (repo / "out").symlink_to(tmp_path / "elsewhere")
    monkeypatch.chdir(repo)
    looked: list[str] = []
    real_exists = os.path.exists
    monkeypatch.setattr(os.path, "exists", lambda p: looked.append(str(p)) or real_exists(p))
    for source in ("/etc/shadow", "/etc/flatjob-no-such-file", "../x", "jobs/../../x", "out", "out/missing"):
        problem = cmp.usage_problem(cmp.Request((source,)), {})
        assert problem is not None and "is outside the repository" in problem, (source, problem)
    assert looked == []
    assert cmp.usage_problem(cmp.Request(("jobs",)), {}) is None and looked == ["jobs"]
    (tmp_path / "link").symlink_to(tmp_path)
    assert cmp.usage_problem(cmp.Request((str(tmp_path / "link" / "repo" / "jobs"),)), {}) is None  # (review of round 4: refused)
