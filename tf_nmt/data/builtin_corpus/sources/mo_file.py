"""Read and write GNU gettext ``.mo`` catalogs (the binary ``msgfmt`` output).

Own small implementation so that entries can be filtered (header, plurals, context)
and tests can build catalogs without the gettext tools.
"""
import struct
from pathlib import Path
from typing import Dict, List, Tuple

from ..errors import CorpusError

MAGIC_LE = 0x950412DE
CONTEXT_SEP = "\x04"
PLURAL_SEP = "\x00"


def read_mo(path: Path) -> List[Tuple[str, str]]:
    """All raw (msgid, msgstr) entries in file order; context and plural forms left inside."""
    data = Path(path).read_bytes()
    if len(data) < 28:
        raise CorpusError(f"{path}: too short for a .mo file")
    for order in ("<", ">"):
        magic, _rev, count, orig_off, trans_off = struct.unpack(order + "5I", data[:20])
        if magic == MAGIC_LE:
            break
    else:
        raise CorpusError(f"{path}: bad .mo magic number")
    entries = []
    try:
        for i in range(count):
            olen, ooff = struct.unpack_from(order + "2I", data, orig_off + 8 * i)
            tlen, toff = struct.unpack_from(order + "2I", data, trans_off + 8 * i)
            msgid = data[ooff:ooff + olen].decode("utf-8")
            msgstr = data[toff:toff + tlen].decode("utf-8")
            entries.append((msgid, msgstr))
    except (struct.error, UnicodeDecodeError) as exc:
        raise CorpusError(f"{path}: corrupt .mo entry: {exc}") from exc
    return entries


def write_mo(path: Path, messages: Dict[str, str]) -> None:
    """Write ``messages`` (msgid -> msgstr, header under "") as a little-endian .mo file."""
    items = sorted((k.encode("utf-8"), v.encode("utf-8")) for k, v in messages.items())
    count = len(items)
    orig_table = 28
    trans_table = orig_table + 8 * count
    offset = trans_table + 8 * count
    ids, strs, orig_index, trans_index = b"", b"", [], []
    for key, _ in items:
        orig_index.append((len(key), offset + len(ids)))
        ids += key + b"\x00"
    offset += len(ids)
    for _, value in items:
        trans_index.append((len(value), offset + len(strs)))
        strs += value + b"\x00"
    out = struct.pack("<7I", MAGIC_LE, 0, count, orig_table, trans_table, 0, 0)
    out += b"".join(struct.pack("<2I", *e) for e in orig_index)
    out += b"".join(struct.pack("<2I", *e) for e in trans_index)
    Path(path).write_bytes(out + ids + strs)


def translation_entries(path: Path) -> List[Tuple[str, str]]:
    """(English msgid, German msgstr) pairs: header dropped, context removed, plural -> singular."""
    pairs = []
    for msgid, msgstr in read_mo(path):
        if not msgid or not msgstr:
            continue
        msgid = msgid.split(CONTEXT_SEP, 1)[-1]
        msgid = msgid.split(PLURAL_SEP, 1)[0]
        msgstr = msgstr.split(PLURAL_SEP, 1)[0]
        if msgid and msgstr:
            pairs.append((msgid, msgstr))
    return pairs
