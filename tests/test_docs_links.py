"""Every relative link in README.md, docs/ and overlays/ names a file that exists and, with a
`#anchor`, a heading of that file (GitHub's anchors: lower case, punctuation but `-` and `_`
dropped, spaces as `-`).  docs/run-local.md once linked `runtime.md#the-fake-cluster`, a
section renamed "The simulated cluster"."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "overlays").rglob("*.md")])
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def anchors(path: Path) -> set[str]:
    """GitHub's heading anchors of a Markdown file."""
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    out = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", text, re.MULTILINE):
        plain = re.sub(r"[`*]", "", heading).strip().lower()
        out.add(re.sub(r"[^\w\- ]", "", plain).replace(" ", "-"))
    return out


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(ROOT)) for d in DOCS])
def test_every_relative_link_and_anchor_exists(doc: Path) -> None:
    broken = []
    for target in LINK.findall(FENCE.sub("", doc.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        file, _, anchor = target.partition("#")
        path = (doc.parent / file).resolve() if file else doc
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(f"{target}: no such heading")
    assert not broken, broken
