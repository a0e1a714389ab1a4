"""Keep TensorFlow's and SentencePiece's start-up lines off a tf-nmt command's terminal.

On a CPU machine every command printed a handful of native log lines that say nothing to a user
(no CUDA driver, oneDNN on, the instructions the wheel was not built for, SentencePiece's
identity normaliser). ``TF_CPP_MIN_LOG_LEVEL`` does not reach most of them: TensorFlow and
tensorflow-text log through absl before ``absl::InitializeLog()``, which writes everything to
stderr, and tensorflow-text carries its own SentencePiece. So the command line routes file
descriptor 2 (what native code and child processes write) through a small filter process that
drops exactly the lines of :data:`NOISE` and passes everything else on at once; Python's own
``sys.stderr`` (tracebacks, warnings, progress on a terminal) keeps the original stream.
``tf-nmt --verbose`` shows it all.
"""
from __future__ import annotations

import atexit
import os
import re
import subprocess
import sys
from typing import Optional

# One regular expression per start-up line (searched, so a horovodrun "[1,0]<stderr>:" prefix
# still matches). Anything else, every real warning and error included, passes.
NOISE = (
    r"^WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR$",
    r"port\.cc:\d+\] oneDNN custom operations are on\.",
    r"cudart_stub\.cc:\d+\] Could not find cuda drivers on your machine",
    r"cuda_platform\.cc:\d+\] failed call to cuInit:",
    r"cuda_executor\.cc:\d+\] .*(cuInit|CUDA_ERROR_NO_DEVICE|no NVIDIA GPU device)",
    r"cpu_feature_guard\.cc:\d+\] This TensorFlow binary is optimized to use available CPU",
    r"To enable the following instructions: .* rebuild TensorFlow with the appropriate "
    r"compiler flags\.$",
    r"normalizer\.cc\(\d+\) LOG\(INFO\) precompiled_charsmap is empty\. use identity "
    r"normalization\.",
)
NOISE_RE = re.compile("|".join(f"(?:{p})" for p in NOISE))

# The filter process: no imports beyond the standard library's os, re, select and sys, so it
# starts in milliseconds. A line is passed on as soon as it is complete; a partial line (a
# progress bar redrawn with \r, a prompt) as soon as the writer pauses.
_FILTER = r"""
import os, re, select, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)  # the command handles Ctrl-C; drain until EOF
noise = re.compile(sys.argv[1])
out, buf = sys.stdout.buffer, b""
def emit(data):
    out.write(data)
    out.flush()
while True:
    ready, _, _ = select.select([0], [], [], 0.1 if buf else None)
    if not ready:
        emit(buf)
        buf = b""
        continue
    chunk = os.read(0, 65536)
    if not chunk:
        emit(buf)
        break
    *lines, buf = (buf + chunk).split(b"\n")
    kept = [l + b"\n" for l in lines if not noise.search(l.decode("utf-8", "replace"))]
    if kept:
        emit(b"".join(kept))
"""


def is_noise(line: str) -> bool:
    """Whether ``line`` (without its newline) is one of the start-up lines tf-nmt hides."""
    return NOISE_RE.search(line) is not None


_filter: Optional[subprocess.Popen] = None


def hide_startup_noise() -> None:
    """Route file descriptor 2 through the noise filter for the rest of this process and its
    children (call before TensorFlow is imported); ``sys.stderr`` keeps the original stream.
    Does nothing where there is no real fd 2 or the filter cannot start."""
    global _filter
    if _filter is not None:
        return
    try:
        original = os.dup(2)
        proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", _FILTER, NOISE_RE.pattern],
                                stdin=subprocess.PIPE, stdout=original, stderr=original,
                                close_fds=True)
    except (OSError, ValueError):
        return
    sys.stderr.flush()
    assert proc.stdin is not None
    os.dup2(proc.stdin.fileno(), 2)
    proc.stdin.close()  # fd 2 is now the only writer here
    sys.stderr = os.fdopen(original, "w", buffering=1, encoding=sys.stderr.encoding,
                           errors=sys.stderr.errors)
    _filter = proc
    atexit.register(_drain, original)


def _drain(original: int) -> None:
    """At exit: close this process's end of the filter, so it forwards what is left and ends
    (children still writing to it keep it open; they are not waited for beyond a few seconds)."""
    try:
        os.dup2(original, 2)
    except OSError:
        return
    if _filter is not None:
        try:
            _filter.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
