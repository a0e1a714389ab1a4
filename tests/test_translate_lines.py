"""``tf-nmt translate`` is line-exact and streaming (tf_nmt.commands.translate): output line i
translates input line i whatever characters a line holds, empty lines stay empty, and the input
is consumed a window at a time. A stand-in engine keeps these checks free of TensorFlow; the
engines themselves are run in tests/test_cli.py and tests/export/test_ctranslate2.py."""
import io
import sys

import pytest

from tf_nmt.commands import translate as tr
from tf_nmt.errors import UsageError

#: Every character str.splitlines() breaks at, besides \n and \r\n.
BREAKS = ["\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
LINES = [f"left{c}right" for c in BREAKS] + ["", "   ", "plain text", "last"]


def upper(lines):
    """The stand-in engine: one output per line, in order (and a break inside one output)."""
    return [line.upper().replace("PLAIN", "PLAIN\nTEXT") for line in lines]


def run_file(tmp_path, data: bytes, window=3, engine=upper):
    src = tmp_path / "in.txt"
    src.write_bytes(data)
    out = []
    count = tr.translate_stream(engine, tr.open_source(str(src)), out.append, window)
    return count, "".join(out)


def test_every_line_break_character_stays_inside_its_line(tmp_path):
    data = "\n".join(LINES).encode("utf-8") + b"\n"
    count, text = run_file(tmp_path, data)
    out = text.split("\n")[:-1]
    assert count == len(LINES) == len(out)
    for line, got in zip(LINES, out):
        if line.strip():
            # a \r or \n inside a translation becomes a space: one output line per input line
            assert got == line.upper().replace("PLAIN", "PLAIN TEXT").replace("\r", " ")
        else:
            assert got == ""  # empty and blank lines stay empty, never sent to the engine


def test_crlf_is_accepted_and_a_last_line_without_newline_is_kept(tmp_path):
    count, text = run_file(tmp_path, b"a\r\nb\r\n\r\nc")
    assert count == 4 and text == "A\nB\n\nC\n"


def test_invalid_utf8_names_the_line(tmp_path):
    with pytest.raises(UsageError, match=r"line 2 is not valid UTF-8"):
        run_file(tmp_path, b"good\nbad \xff\n")


def test_the_input_is_read_a_window_at_a_time(tmp_path):
    """The engine never sees more than a window, and the first window is written before the
    rest of the input is read (bounded memory)."""
    seen, read_when_written = [], []
    src = tmp_path / "in.txt"
    src.write_text("".join(f"line {i}\n" for i in range(10)))
    source = tr.open_source(str(src))

    def engine(lines):
        seen.append(len(lines))
        return lines

    tr.translate_stream(engine, source, lambda t: read_when_written.append(source.read()), 4)
    assert seen == [4, 4, 2]
    assert read_when_written[0] < src.stat().st_size


def test_stdin_binary_and_text_streams_split_the_same_way(monkeypatch):
    data = "\n".join(LINES) + "\n"

    for stdin in (io.TextIOWrapper(io.BytesIO(data.encode("utf-8")), encoding="utf-8"),
                  io.StringIO(data, newline="")):
        monkeypatch.setattr(sys, "stdin", stdin)
        out = []
        assert tr.translate_stream(upper, tr.open_source("-"), out.append, 5) == len(LINES)
        assert len("".join(out).split("\n")) - 1 == len(LINES)


def test_an_output_file_appears_only_complete(tmp_path, monkeypatch):
    src = tmp_path / "in.txt"
    src.write_text("one\ntwo\nthree\n")
    out = tmp_path / "out.txt"
    out.write_text("old\n")

    def failing(lines):
        raise RuntimeError("engine died")

    with pytest.raises(RuntimeError):
        tr._translate_to_file(failing, tr.open_source(str(src)), out, 2,
                              tr.Progress(tr.open_source(str(src)), io.StringIO()))
    assert out.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == [
        "in.txt", "out.txt"]
    progress = tr.Progress(tr.open_source(str(src)), io.StringIO())
    assert tr._translate_to_file(upper, tr.open_source(str(src)), out, 2, progress) == 3
    assert out.read_text() == "ONE\nTWO\nTHREE\n"


def test_progress_prints_a_final_count_and_an_eta_on_a_terminal(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("a\nb\n")

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    stream = Terminal()
    source = tr.open_source(str(src))
    progress = tr.Progress(source, stream, interval=0.0)
    tr.translate_stream(upper, source, lambda t: None, 1, progress)
    progress.close()
    text = stream.getvalue()
    assert "ETA" in text and "of the input" in text and "translated 2 lines in" in text
