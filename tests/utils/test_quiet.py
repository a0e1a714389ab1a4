"""Quiet commands (tf_nmt.utils.quiet, ``tf-nmt --verbose``): TensorFlow's and SentencePiece's
start-up lines are hidden from a real command's stderr, real warnings and errors are not, and
``--verbose`` shows everything."""
from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tf_nmt.utils import quiet

# The lines a CPU machine printed on every command (as TensorFlow 2.21, tensorflow-text and
# horovodrun write them).
STARTUP = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1795847253.294169   16478 port.cc:153] oneDNN custom operations are on. You may "
    "see slightly different numerical results due to floating-point round-off errors.",
    "I0000 00:00:1795847253.294509   16478 cudart_stub.cc:31] Could not find cuda drivers on your "
    "machine, GPU will not be used.",
    "E0000 00:00:1795847255.361824   16478 cuda_platform.cc:52] failed call to cuInit: INTERNAL: "
    "CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)",
    "2026-11-28 06:00:00.000000: I tensorflow/core/platform/cpu_feature_guard.cc:210] This "
    "TensorFlow binary is optimized to use available CPU instructions in performance-critical "
    "operations.",
    "To enable the following instructions: AVX2 FMA, in other operations, rebuild TensorFlow with "
    "the appropriate compiler flags.",
    "normalizer.cc(51) LOG(INFO) precompiled_charsmap is empty. use identity normalization.",
    "[1,0]<stderr>:normalizer.cc(51) LOG(INFO) precompiled_charsmap is empty. use identity "
    "normalization.",
]
REAL = [
    "W0000 00:00:1795847255.361824   16478 op_kernel.cc:1840] OP_REQUIRES failed: Invalid "
    "argument: indices[3] = 9000 is not in [0, 8000)",
    "E0000 00:00:1795847255.361824   16478 cuda_platform.cc:99] something else went wrong",
    "WARNING: the learning rate is very high",
    "tf-nmt: error: --vocab-size 100: at least 300",
    "To enable the feature, set X",
]


def test_the_startup_lines_are_noise_and_real_warnings_are_not():
    assert [line for line in STARTUP if not quiet.is_noise(line)] == []
    assert [line for line in REAL if quiet.is_noise(line)] == []


def test_the_filter_drops_only_noise_forwards_partial_lines_and_survives_an_abort(tmp_path):
    """Native writes to fd 2 (this process's and a child's) pass through the filter; Python's
    sys.stderr stays the original stream; what was written before an abort still arrives."""
    script = textwrap.dedent(f"""
        import os, subprocess, sys, time
        from tf_nmt.utils import quiet
        quiet.hide_startup_noise()
        lines = {STARTUP + REAL!r}
        os.write(2, "".join(l + "\\n" for l in lines).encode())
        subprocess.run([sys.executable, "-c", "import os; os.write(2, b'from a child\\\\n')"])
        print("python stderr", file=sys.stderr)
        os.write(2, b"progress 50%\\r")
        time.sleep(0.5)
        os.write(2, b"progress 100%\\n")
        os.write(2, b"F0000 fatal: the last words\\n")
        os.abort()
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert proc.returncode != 0  # aborted
    err = proc.stderr.decode()
    for line in STARTUP:
        assert line not in err
    for line in REAL + ["from a child", "python stderr", "progress 50%\rprogress 100%",
                        "F0000 fatal: the last words"]:
        assert line in err, line


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("quiet")
    rng = random.Random(0)
    words = [("the", "le"), ("house", "maison"), ("cat", "chat"), ("dog", "chien"),
             ("runs", "court"), ("big", "grand"), ("red", "rouge")]
    pairs = []
    for i in range(300):
        chosen = [rng.choice(words) for _ in range(rng.randint(3, 6))]
        pairs.append((" ".join(w[0] for w in chosen) + f" {i}",
                      " ".join(w[1] for w in chosen) + f" {i}"))
    (root / "t.en").write_text("".join(p[0] + "\n" for p in pairs))
    (root / "t.fr").write_text("".join(p[1] + "\n" for p in pairs))
    return root


def tf_nmt(cwd: Path, *argv: str) -> subprocess.CompletedProcess:
    """``python -m tf_nmt ARGV`` as a user runs it (the real command line, not main(argv))."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    return subprocess.run([sys.executable, "-m", "tf_nmt", *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def prepare(corpus: Path, data: str, *flags: str, verbose: bool = False,
            vocab: str = "300") -> subprocess.CompletedProcess:
    return tf_nmt(corpus, *(["--verbose"] if verbose else []), "prepare-data", "--data-dir", data,
                  "--src-lang", "en", "--tgt-lang", "fr", "--train-src", "t.en", "--train-tgt",
                  "t.fr", "--vocab-size", vocab, "--dev-size", "20", "--workers", "2",
                  "--allow-smaller-vocab", *flags)


@pytest.mark.slow
def test_prepare_data_is_quiet_unless_verbose(corpus):
    quiet_run = prepare(corpus, "quiet")
    assert quiet_run.returncode == 0, quiet_run.stderr
    assert "written to quiet" in quiet_run.stdout
    assert quiet_run.stderr == "", quiet_run.stderr  # nothing at all on a CPU machine
    loud = prepare(corpus, "loud", verbose=True)
    assert loud.returncode == 0, loud.stderr
    # TensorFlow's absl lines and tensorflow-text's SentencePiece line, which the filter hides
    for text in ("port.cc", "cudart_stub.cc", "precompiled_charsmap is empty"):
        assert text in loud.stderr, (text, loud.stderr)
    bad = prepare(corpus, "bad", vocab="100")  # refused after TensorFlow has loaded
    assert bad.returncode == 2, bad.stderr
    assert bad.stderr == "tf-nmt: error: --vocab-size 100: at least 300 (256 byte pieces + " \
        "specials)\n"  # the real error reaches the user, and only it


def test_help_names_verbose(corpus):
    run = tf_nmt(corpus, "--help")
    assert run.returncode == 0 and "--verbose" in run.stdout


def test_a_partial_line_is_passed_on_when_the_writer_pauses():
    """A progress line redrawn with \\r (no newline) reaches the terminal while the writer works
    on, not when its line is finished."""
    import select

    script = ("import os, time\nfrom tf_nmt.utils import quiet\nquiet.hide_startup_noise()\n"
              "os.write(2, b'progress 50%\\r')\ntime.sleep(5)\nos.write(2, b'done\\n')\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE)
    try:
        seen, deadline = b"", 3.0
        while b"progress 50%" not in seen:
            ready, _, _ = select.select([proc.stderr], [], [], deadline)
            assert ready, f"the partial line was held back ({seen!r})"
            seen += os.read(proc.stderr.fileno(), 4096)
        assert proc.poll() is None  # it arrived while the writer was still sleeping
    finally:
        proc.kill()
        proc.wait()
