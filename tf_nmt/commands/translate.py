"""``tf-nmt translate``: lines of source text, from a file or stdin, translated line by line with
a run (its checkpoint), a SavedModel export or a CTranslate2 export.

Line-exact and streaming: the input is split on ``\\n`` alone (``\\r\\n`` accepted), never on the
other characters :meth:`str.splitlines` breaks at (U+2028, U+0085, ``\\x0b``, ``\\x0c``...), so
output line i always translates input line i, and there are as many output lines as input
lines: an empty (or blank) line stays empty, and a line break inside a translation becomes a
space. The input is read and written a window of lines at a time (length-sorted batches inside
each window), so memory stays bounded for any file size; an ``output`` file is written beside
its path and renamed into place when complete.
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable, Iterator, List, Optional, TextIO, Tuple

from tf_nmt.errors import UsageError

#: Batches per window: the lines read, sorted by length and translated before any is written.
WINDOW_BATCHES = 16
Engine = Callable[[List[str]], List[str]]


@dataclass
class Source:
    """The input's lines as (line number, text), and how much of it has been read."""

    lines: Iterator[Tuple[int, str]]
    size: Optional[int]  # bytes in all (None: unknown, e.g. a pipe)
    read: Callable[[], int]  # bytes read so far


def _decode(data: bytes, name: str, number: int) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise UsageError(f"{name}: line {number} is not valid UTF-8 ({err.reason} at byte "
                         f"{err.start + 1} of the line)") from None


def _binary_lines(stream: BinaryIO, name: str, counter: List[int]) -> Iterator[Tuple[int, str]]:
    for number, raw in enumerate(stream, 1):  # a binary stream breaks at b"\n" only
        counter[0] += len(raw)
        raw = raw[:-1] if raw.endswith(b"\n") else raw
        raw = raw[:-1] if raw.endswith(b"\r") else raw
        yield number, _decode(raw, name, number)


def _text_lines(stream: TextIO) -> Iterator[Tuple[int, str]]:
    """An already decoded stream (e.g. one a test put in place of stdin), split on \\n alone."""
    pending = ""
    number = 0
    for chunk in iter(lambda: stream.read(1 << 16), ""):
        pending += chunk
        *complete, pending = pending.split("\n")
        for line in complete:
            number += 1
            yield number, line[:-1] if line.endswith("\r") else line
    if pending:
        yield number + 1, pending[:-1] if pending.endswith("\r") else pending


def open_source(path: Optional[str]) -> Source:
    """The lines of ``path`` (None or ``-``: stdin)."""
    counter = [0]
    if path is None or path == "-":
        stdin = getattr(sys.stdin, "buffer", None)
        if stdin is None:
            return Source(_text_lines(sys.stdin), None, lambda: 0)
        return Source(_binary_lines(stdin, "stdin", counter), None, lambda: counter[0])
    file = Path(path)
    if not file.exists():
        raise UsageError(f"--input {path}: no such file")
    if file.is_dir():
        raise UsageError(f"--input {path}: a directory, not a file")

    def lines() -> Iterator[Tuple[int, str]]:
        with file.open("rb") as stream:
            yield from _binary_lines(stream, str(path), counter)

    return Source(lines(), file.stat().st_size if file.is_file() else None, lambda: counter[0])


class Progress:
    """Lines translated, lines per second and, for a file, the share read and an ETA, rewritten
    on stderr at most every ``interval`` seconds when stderr is a terminal; a final count in any
    case."""

    def __init__(self, source: Source, stream: Optional[TextIO] = None,
                 interval: float = 1.0) -> None:
        self.source, self.stream, self.interval = source, stream or sys.stderr, interval
        self.live = bool(getattr(self.stream, "isatty", lambda: False)())
        self.count = 0
        self.start = self.last = time.perf_counter()

    def __call__(self, n: int) -> None:
        self.count += n
        now = time.perf_counter()
        if self.live and now - self.last >= self.interval:
            self.last = now
            self.stream.write("\r" + self._line(now))
            self.stream.flush()

    def _line(self, now: float) -> str:
        seconds = max(now - self.start, 1e-9)
        text = f"translated {self.count:,} lines ({self.count / seconds:.1f} lines/s)"
        if self.source.size:
            share = min(self.source.read() / self.source.size, 1.0)
            eta = seconds * (1 - share) / max(share, 1e-9)
            text += f", {share:.0%} of the input, ETA {int(eta // 60)}:{int(eta % 60):02d}"
        return text

    def close(self) -> None:
        now = time.perf_counter()
        end = "\r" if self.live else ""
        self.stream.write(f"{end}translated {self.count:,} lines in {now - self.start:.1f} s "
                          f"({self.count / max(now - self.start, 1e-9):.1f} lines/s)\n")
        self.stream.flush()


def translate_stream(engine: Engine, source: Source, write: Callable[[str], None],
                     window: int, progress: Optional[Callable[[int], None]] = None) -> int:
    """Translate ``source`` window by window with ``engine`` (a list of non-blank lines -> their
    translations, in order), writing one output line per input line; returns the line count."""
    total = 0
    batch: List[str] = []

    def flush() -> None:
        todo = [line for line in batch if line.strip()]
        done = iter(engine(todo) if todo else [])
        out = []
        for line in batch:
            text = next(done) if line.strip() else ""
            out.append(" ".join(text.replace("\r", "\n").split("\n")) + "\n")
        write("".join(out))
        if progress is not None:
            progress(len(batch))
        batch.clear()

    for _number, line in source.lines:
        batch.append(line)
        total += 1
        if len(batch) >= window:
            flush()
    if batch:
        flush()
    return total


def run_engine(run_dir: Path, checkpoint: Optional[str], weights: Optional[str],
               beam_size: Optional[int], batch_size: int, lowprec: bool) -> Engine:
    """Translation with a run's checkpoint (``weights`` None: the EMA where it holds one)."""
    from tf_nmt.inference.serving_graph import make_translate_fn, translate_texts
    from tf_nmt.models.activation_quant import inference_engine, use_engine
    from tf_nmt.run_dir import load_run

    run = load_run(Path(run_dir), checkpoint, weights)
    print(f"translating with the {run.weights} weights of {run.checkpoint}", file=sys.stderr)
    fn = make_translate_fn(run.model, run.tokenizer, beam_size or run.cfg.decode.beam_size,
                           run.cfg.decode.length_penalty)
    matmuls = inference_engine(run.model, "lowprec" if lowprec else "emulated")

    def engine(lines: List[str]) -> List[str]:
        with use_engine(matmuls):
            return translate_texts(fn, run.tokenizer, lines, batch_size)

    return engine


def saved_model_engine(export_dir: Path, batch_size: int) -> Engine:
    """Translation with a SavedModel export (its beam fixed at export)."""
    from tf_nmt.inference.saved_model import load_serving

    serve = load_serving(export_dir)

    def engine(lines: List[str]) -> List[str]:
        out: List[str] = []
        for start in range(0, len(lines), batch_size):
            out += serve(lines[start:start + batch_size])
        return out

    return engine


def ctranslate2_engine(export_dir: Path, beam_size: Optional[int], batch_size: int,
                       vmap: Optional[bool]) -> Engine:
    """Translation with a CTranslate2 export (length-sorted batches)."""
    from tf_nmt.inference.ctranslate2 import CTranslate2Translator, translate_sorted

    translator = CTranslate2Translator(Path(export_dir), use_vmap=vmap)
    print(translator.describe(), file=sys.stderr)
    return lambda lines: list(translate_sorted(translator, lines, beam_size, batch_size))


def translate(input_path: Optional[str] = None, output_path: Optional[str] = None,
              run_dir: Optional[Path] = None, export_dir: Optional[Path] = None,
              checkpoint: Optional[str] = None, weights: Optional[str] = None,
              beam_size: Optional[int] = None, batch_size: int = 64, lowprec: bool = False,
              vmap: Optional[bool] = None) -> int:
    """Translate the lines of ``input_path`` (None or ``-``: stdin) into ``output_path`` (None:
    stdout) with a run (``run_dir``) or an export (``export_dir``: a SavedModel, or a CTranslate2
    directory, told apart by its files); returns the number of lines."""
    from tf_nmt.inference.formats import is_ctranslate2_dir

    if (run_dir is None) == (export_dir is None):
        raise UsageError("translate needs one of --run-dir and --export-dir")
    if batch_size < 1:
        raise UsageError(f"--batch-size must be >= 1, got {batch_size}")
    if export_dir and lowprec:
        raise UsageError("--lowprec translates from --run-dir (the export runs stock ops)")
    if export_dir and checkpoint:
        raise UsageError("--checkpoint would be ignored: an export holds one model (export "
                         "another checkpoint, or translate with --run-dir --checkpoint)")
    if export_dir and weights:
        raise UsageError("--weights would be ignored: an export holds the weights it was "
                         "exported with (tf-nmt export --weights; translate with --run-dir "
                         "--weights)")
    ct2 = export_dir is not None and is_ctranslate2_dir(Path(export_dir))
    if vmap is not None and not ct2:
        raise UsageError("--vmap/--no-vmap would be ignored: the vocabulary map is for a "
                         "CTranslate2 export (`tf-nmt export --format ctranslate2`)")
    source = open_source(input_path)
    if ct2:
        engine = ctranslate2_engine(Path(export_dir), beam_size, batch_size, vmap)
    elif export_dir is not None:
        if beam_size:
            raise UsageError("--beam-size would be ignored: a SavedModel's beam is fixed when it "
                             "is exported (tf-nmt export --beam-size)")
        engine = saved_model_engine(Path(export_dir), batch_size)
    else:
        engine = run_engine(Path(run_dir), checkpoint, weights, beam_size, batch_size, lowprec)
    progress = Progress(source)
    window = batch_size * WINDOW_BATCHES
    if output_path is None:
        def write(text: str) -> None:
            sys.stdout.write(text)
            sys.stdout.flush()

        count = translate_stream(engine, source, write, window, progress)
    else:
        count = _translate_to_file(engine, source, Path(output_path), window, progress)
    progress.close()
    return count


def _translate_to_file(engine: Engine, source: Source, output: Path, window: int,
                       progress: Progress) -> int:
    """Stream into a file beside ``output`` and rename it into place once complete (an
    interrupted run leaves ``output`` as it was)."""
    from tf_nmt.utils.io import fsync_directory

    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(f".{output.name}.partial-{os.getpid()}")
    try:
        with partial.open("w", encoding="utf-8", newline="\n") as stream:
            count = translate_stream(engine, source, stream.write, window, progress)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(partial, output)
        fsync_directory(output.parent)
    finally:
        partial.unlink(missing_ok=True)
    return count
