"""No text flatjob ships still says git holds Pods: git holds PodTemplates (architecture §4).

Covers: the files `flatjob init` writes (argocd, flux, none), every command's --help, README.md,
docs/, overlays/, schemas/ (what `flatjob explain` and editors show), the Dockerfile, action.yml and the code's docstrings and comments are free of the phrases the pods-in-git design left behind (Flux's ssa
annotation on pods, pods.yaml, a paused compile rendering no pods, the runtime removing a gate
from pods git holds...).  docs/architecture.md's upgrade note, which names pods.yaml on
purpose, is the one exception.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import ROOT
from lintkit import run_cli

from flatjob.compiler.cli import LazyGroup, cli

# Matched case-insensitively, with line breaks, indentation and comment markers (#, --) folded
# into single spaces, so a phrase split across lines of a header is still found.
STALE = (
    "pods carry `kustomize",  # Flux's ssa annotation; pods carrying the runtime's own annotations is right
    "fluxcd.io/ssa",
    "ssa: ifnotpresent",
    "creates missing pods",
    "gated pods in git",
    "pods.yaml",
    "renders no pods",
    "no pods rendered",
    "no pods are rendered",
    "renders-no-pods",
    "a paused job's pods are pruned",
    "health-check every pod",
    "keeps some pods gated",
    "the pods come back from git",
    "pod must stay exactly what git holds",
    "scheduling gate from pods",
    "differences the flatjob runtime makes",
    "what flatjob's runtime changes on purpose",
    "configmap, pods and runtime",
    "runtimeimage, fluxannotations",
    "no end-to-end test can pass by skipping",
    "re-renders pods",  # the runtime copies PodTemplates; it renders nothing
    "runtime` for one job",  # the default runtime serves a namespace
    "pods are rendered up to",  # elastic.maxReplicas: PodTemplates are (flatjob explain, schemas, CRDs)
    "pods rendered for each",
    "the job's runtime",  # one runtime serves a namespace by default: "flatjob's runtime" (review of round 12)
)

# Names that are there on purpose: the upgrade prunes the pods.yaml earlier versions wrote.
ON_PURPOSE = {("compiler/output.py", "pods.yaml")}

# docs/architecture.md §4 explains the upgrade from pods.yaml on purpose.
UPGRADE_NOTE = re.compile(r"^- \*\*Upgrading from pods in git\.\*\*.*?(?=^- |^## |\Z)", re.M | re.S)


def folded(text: str) -> str:
    return re.sub(r"\s*\n\s*(?:#|--)?\s*", " ", text).lower()


def stale_phrases(text: str) -> list[str]:
    flat = folded(text)
    return [phrase for phrase in STALE if phrase in flat]


def shipped_docs() -> dict[str, str]:
    """README, docs/, overlays/, schemas/ and the golden cases' inputs (cited by the compatibility table as evidence)."""
    paths = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted(p for p in (ROOT / "overlays").rglob("*") if p.is_file()),
             *sorted((ROOT / "tests" / "golden").glob("*/job.yaml")), ROOT / "Dockerfile", ROOT / "action.yml",
             *sorted(p for p in (ROOT / "schemas").rglob("*") if p.is_file()),
             *sorted(p for d in ("compiler", "runtime") for p in (ROOT / d).rglob("*.py"))]
    texts = {p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8") for p in paths}
    note = UPGRADE_NOTE.search(texts["docs/architecture.md"])
    assert note and "pods.yaml" in note.group(0), "the upgrade note moved: update UPGRADE_NOTE"
    texts["docs/architecture.md"] = UPGRADE_NOTE.sub("", texts["docs/architecture.md"])
    return texts


@pytest.mark.parametrize("gitops", ["argocd", "flux", "none"])
def test_init_writes_no_stale_pod_text(tmp_path: Path, gitops: str) -> None:
    result = run_cli("init", "--gitops", gitops, "--repo-url", "https://example.com/t.git", str(tmp_path))
    assert result.exit_code == 0, result.output
    found = {p.relative_to(tmp_path).as_posix(): hits for p in sorted(tmp_path.rglob("*")) if p.is_file() and (hits := stale_phrases(p.read_text(encoding="utf-8")))}
    assert found == {}


@pytest.mark.parametrize("name", [None, *LazyGroup.list_commands(cli, None)])  # type: ignore[arg-type]
def test_help_has_no_stale_pod_text(name: str | None) -> None:
    result = run_cli(*([name] if name else []), "--help")
    assert result.exit_code == 0, result.output
    assert stale_phrases(result.stdout) == []


def test_docs_and_overlays_have_no_stale_pod_text() -> None:
    found = {path: hits for path, text in shipped_docs().items() if (hits := [h for h in stale_phrases(text) if (path, h) not in ON_PURPOSE])}
    assert found == {}


def test_the_check_finds_a_phrase_split_across_comment_lines() -> None:
    assert stale_phrases("# the runtime removes flatjob's scheduling gate\n# from pods") == ["scheduling gate from pods"]
    assert stale_phrases("Pods carry `kustomize.toolkit.fluxcd.io/ssa:\nIfNotPresent`") == ["pods carry `kustomize", "fluxcd.io/ssa", "ssa: ifnotpresent"]
