"""display.visible: no character of a stranger's text acts or hides when shown.

Before issue 21's last round it escaped the bidi embeddings, overrides and isolates but not the
marks (U+200E, U+200F, U+061C), the zero-width characters (U+200B-U+200D, U+2060-U+2064),
nor the fillers and tags that show nothing: `jobs/a\\u200b.yaml` and `jobs/a.yaml` looked
the same in a terminal, a CI log and the pull request's comment.
"""

from __future__ import annotations

import re
import sys
import unicodedata

import pytest

from flatjob.compiler.display import INVISIBLE, code_block, markdown, markdown_code, visible

FILLERS = "\u115f\u1160\u3164\uffa0\u034f\u17b4\u17b5\u180b\u180e\ufe00\ufe0f\U000e0100\U000e01ef"


def _escaped(text: str) -> bool:
    return not re.search(f"[{INVISIBLE}]", text)


def test_every_format_character_of_this_pythons_unicode_is_escaped() -> None:
    """INVISIBLE is a literal (building it from unicodedata would cost every start ~0.2 s);
    this keeps it whole for the Unicode version of the Python running the tests."""
    missing = [f"U+{c:04X}" for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf" and visible(chr(c)) == chr(c)]
    assert not missing, missing


@pytest.mark.parametrize("char", list("\u200e\u200f\u061c\u200b\u200c\u200d\u2060\u2061\u2062\u2063\u2064\ufeff\u00ad\U000e0001\U000e0041\U000e007f" + FILLERS))
def test_marks_zero_width_characters_fillers_tags_and_selectors_are_escaped(char: str) -> None:
    name = f"jobs/a{char}.yaml"
    code = ord(char)
    escape = f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
    assert visible(name) == f"jobs/a{escape}.yaml"
    assert all(_escaped(shown) for shown in (markdown(name), markdown_code(name), code_block(name)))


def test_text_people_write_is_left_alone() -> None:
    text = "训练 job é ✅ naïve — 日本語 Ωmega"
    assert visible(text) == text
