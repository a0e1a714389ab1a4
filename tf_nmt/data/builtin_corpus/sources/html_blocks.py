"""Collect the text of block elements from an HTML page, keyed for alignment.

A block's text excludes nested blocks (they become blocks of their own), code
(``pre``/``script``/``style``) and subtrees a caller marks as skipped.
"""
from html.parser import HTMLParser
from typing import Callable, Dict, List, Optional, Sequence, Tuple

Attrs = Dict[str, Optional[str]]
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
        "param", "source", "track", "wbr"}
INLINE = {"a", "abbr", "acronym", "b", "big", "cite", "code", "em", "font", "i", "kbd",
          "q", "samp", "small", "span", "strong", "sub", "sup", "tt", "u", "var"}
NEVER_TEXT = {"pre", "script", "style", "head", "noscript", "textarea"}
Block = Tuple[Tuple, str]


class _Frame:
    __slots__ = ("tag", "key", "parts", "skip", "child_counts")

    def __init__(self, tag: str, key: Optional[Tuple], skip: bool):
        self.tag, self.key, self.skip = tag, key, skip
        self.parts: List[str] = []
        self.child_counts: Dict[str, int] = {}


class BlockCollector(HTMLParser):
    """Parse a page into (key, raw text) blocks in document order.

    ``block_key(tag, attrs, path)`` returns a key for block elements (else None);
    ``path`` is the tuple of (tag, sibling index) from the root. ``skip(tag, attrs)``
    hides an element's text from the enclosing block.
    """

    def __init__(self, block_key: Callable[[str, Attrs, Tuple], Optional[Tuple]],
                 skip: Callable[[str, Attrs], bool] = lambda tag, attrs: False):
        super().__init__(convert_charrefs=True)
        self._block_key, self._skip = block_key, skip
        self._stack: List[_Frame] = [_Frame("#root", None, False)]
        self._path: List[Tuple[str, int]] = []
        self._blocks: List[Tuple[Tuple, List[str]]] = []

    def handle_starttag(self, tag: str, attrs: Sequence[Tuple[str, Optional[str]]]) -> None:
        attr_map = dict(attrs)
        parent = self._stack[-1]
        index = parent.child_counts.get(tag, 0)
        parent.child_counts[tag] = index + 1
        if tag in VOID:
            if tag == "br":
                self._text(" ")
            return
        self._path.append((tag, index))
        key = self._block_key(tag, attr_map, tuple(self._path))
        skip = tag in NEVER_TEXT or self._skip(tag, attr_map)
        frame = _Frame(tag, key, skip and key is None)
        if key is not None:
            self._blocks.append((key, frame.parts))
        self._stack.append(frame)

    def handle_startendtag(self, tag: str, attrs: Sequence[Tuple[str, Optional[str]]]) -> None:
        parent = self._stack[-1]
        parent.child_counts[tag] = parent.child_counts.get(tag, 0) + 1

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        for depth in range(len(self._stack) - 1, 0, -1):
            if self._stack[depth].tag == tag:
                del self._stack[depth:]
                del self._path[depth - 1:]
                if tag not in INLINE:
                    self._text(" ")
                return

    def handle_data(self, data: str) -> None:
        self._text(data)

    def _text(self, data: str) -> None:
        for frame in reversed(self._stack):
            if frame.skip:
                return
            if frame.key is not None:
                frame.parts.append(data)
                return

    def blocks(self) -> List[Block]:
        """(key, raw text) for every block seen so far."""
        return [(key, "".join(parts)) for key, parts in self._blocks]


def collect_blocks(html_text: str, block_key, skip=lambda tag, attrs: False) -> List[Block]:
    """Convenience wrapper: parse ``html_text`` and return its blocks."""
    parser = BlockCollector(block_key, skip)
    parser.feed(html_text)
    parser.close()
    return parser.blocks()
