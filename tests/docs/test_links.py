"""Every relative link and every cited repository path in the Markdown documents exists.

Documents: README.md, every docs/**/*.md and every experiments/**/README.md. In each, outside
fenced code blocks:

* a relative Markdown link target (``[text](path#anchor)``, images and reference definitions
  too) must exist, relative to the document (``/path`` relative to the repository root); the
  ``#anchor`` is stripped, and http(s)/mailto links are not checked;
* a code span holding one repository path (starting with one of :data:`PREFIXES`) must exist,
  after stripping a trailing ``:LINE`` or ``:LINE-LINE``. Spans with spaces (commands), globs,
  ``<...>``/``{...}`` or ``NAME``-style placeholders are not paths and are skipped.

One test per document, reporting every failure of it as ``file:line: ...``.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator, List, Optional, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[2]
PREFIXES = ("tf_nmt/", "tests/", "experiments/", "scripts/", "docs/", "custom_ops/",
            "horovod_patches/")
# Built by the install, so absent from a fresh checkout, but fine to cite.
BUILD_OUTPUTS = {"tf_nmt/ops/_tf_nmt_ops.so", "tf_nmt/ops/_tf_nmt_ops.build.json"}
# File stems written in capitals that are real names, not placeholders like NAME or RUN_DIR.
CAPITAL_NAMES = {"README", "LICENSE", "MANIFEST", "CHANGELOG", "CONTRIBUTING", "ARCHITECTURE",
                 "STACK", "NOTICE"}

FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+[\"'(][^)]*)?\)")
REFERENCE_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)", re.M)
LINE_SUFFIX = re.compile(r":\d+(-\d+)?$")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*$")


def documents() -> List[Path]:
    docs = [ROOT / "README.md"] if (ROOT / "README.md").is_file() else []
    docs += sorted((ROOT / "docs").rglob("*.md"))
    docs += sorted((ROOT / "experiments").rglob("README.md"))
    return docs


def blank_fences(text: str) -> str:
    """``text`` with the lines of fenced code blocks emptied (line numbers kept)."""
    out, fence = [], None
    for line in text.split("\n"):
        match = FENCE.match(line)
        if fence is None and match:
            fence = match.group(1)
            out.append("")
        elif fence is not None:
            if line.strip().startswith(fence):
                fence = None
            out.append("")
        else:
            out.append(line)
    return "\n".join(out)


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def code_spans(text: str) -> Iterator[Tuple[int, str]]:
    """(line, content) of every code span of ``text`` (fences already blanked)."""
    for match in CODE_SPAN.finditer(text):
        if "\n\n" not in match.group(2):  # a span never crosses a paragraph
            yield _line(text, match.start()), match.group(2).strip()


def without_code_spans(text: str) -> str:
    """``text`` with code spans replaced by spaces (newlines kept), so links inside are ignored."""
    return CODE_SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def links(text: str) -> Iterator[Tuple[int, str]]:
    """(line, target) of every inline link, image and reference definition."""
    for pattern in (INLINE_LINK, REFERENCE_DEF):
        for match in pattern.finditer(text):
            yield _line(text, match.start(1)), match.group(1).strip("<>")


def is_repo_path(span: str) -> bool:
    """Whether a code span is one concrete repository path (not a command or a pattern)."""
    if not (span.startswith(PREFIXES) or span == "setup.py"):
        return False
    if any(c in span for c in " \t\n*<>{}[]?") or "..." in span or "…" in span:
        return False
    parts = LINE_SUFFIX.sub("", span).rstrip("/").split("/")
    return not any(PLACEHOLDER.match(part.split(".")[0]) and part.split(".")[0] not in CAPITAL_NAMES
                   for part in parts)


def problems(doc: Path, raw: Optional[str] = None) -> List[str]:
    """Every broken link and missing cited path of ``doc`` (or of ``raw`` read as if it were
    ``doc``), as ``file:line: message``."""
    text = blank_fences(doc.read_text(encoding="utf-8") if raw is None else raw)
    name = doc.relative_to(ROOT)
    found = []
    for line, target in links(without_code_spans(text)):
        if SCHEME.match(target) or target.startswith("#"):
            continue  # http(s), mailto, ... and anchors within the page
        path = target.split("#", 1)[0].split("?", 1)[0]
        resolved = ROOT / path.lstrip("/") if path.startswith("/") else doc.parent / path
        if not resolved.exists():
            found.append(f"{name}:{line}: link target {target!r} does not exist")
    for line, span in code_spans(text):
        if not is_repo_path(span):
            continue
        path = LINE_SUFFIX.sub("", span)
        if path.rstrip("/") not in BUILD_OUTPUTS and not (ROOT / path).exists():
            found.append(f"{name}:{line}: cited path `{span}` does not exist")
    return found


@pytest.mark.parametrize("doc", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_links_and_cited_paths_exist(doc):
    found = problems(doc)
    assert not found, f"{len(found)} broken link(s)/path(s):\n" + "\n".join(found)


def test_the_checker_sees_what_it_should():
    """The scanner itself: links, code spans, fences, line suffixes, placeholders, build outputs."""
    text = "\n".join([
        "[ok](../setup.py) [bad](missing.md#part) [web](https://example.org) [top](#x)",
        "`tf_nmt/config.py:12-30` `tf_nmt/nope.py` `experiments/NAME/README.md` `tf-nmt train x`",
        "```bash", "[in fence](nowhere.md) `tf_nmt/in_fence.py`", "```",
        "`[not a link](nowhere.md)` `docs/gen_config_reference.py` `tf_nmt/ops/_tf_nmt_ops.so`",
        "[ref]: ../nowhere-either.md",
    ])
    found = problems(ROOT / "docs" / "_probe.md", text)
    assert found == ["docs/_probe.md:1: link target 'missing.md#part' does not exist",
                     "docs/_probe.md:7: link target '../nowhere-either.md' does not exist",
                     "docs/_probe.md:2: cited path `tf_nmt/nope.py` does not exist"], found
