"""One engine's peak resident memory, in a process of its own (``python -m
experiments.serving_speed.rss_worker SPEC.json``), for ``serving-engines``
(:mod:`experiments.serving_speed.engines`).

The spec names the engine (``savedmodel`` or ``ctranslate2``), its export directory, the texts,
the sentences per request, the beam (CTranslate2; a SavedModel's beam is fixed at export) and the
CTranslate2 translator's keyword arguments (``ct2``: threads, backend, vocabulary map). The worker imports only what a serving process of that engine needs: a
SavedModel client ``tensorflow`` and ``tensorflow_text`` (no tf_nmt), a CTranslate2 one
``ctranslate2`` and ``sentencepiece`` through :mod:`tf_nmt.export.ctranslate2` (no TensorFlow).
It loads the export, translates the texts request by request and prints one JSON line:
``resource.getrusage(RUSAGE_SELF).ru_maxrss`` (KiB on Linux) after the imports, after loading
and at the end (the peak), ``VmHWM`` of ``/proc/self/status`` as a cross-check, and whether
TensorFlow was imported.

Linux carries ``ru_maxrss`` over ``fork`` and ``execve``: a process started directly by the
benchmark (about 1 GB with TensorFlow and the loaded engines) would report the benchmark's peak.
:data:`LAUNCH` therefore starts the worker from a small intermediate interpreter, whose peak
(a few MiB, ``maxrss_kib_at["start"]``) is all the worker inherits.
"""
from __future__ import annotations

import json
import resource
import sys
import time
from typing import Optional

#: The command that runs this worker on SPEC: an intermediate ``python -c`` (small) starts it.
LAUNCH = [sys.executable, "-c", "import subprocess, sys; sys.exit(subprocess.call(sys.argv[1:]))",
          sys.executable, "-m", "experiments.serving_speed.rss_worker"]


def _maxrss_kib() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def _vm_hwm_kib() -> Optional[int]:
    """``VmHWM`` of /proc/self/status (this address space's peak, KiB), None where absent."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def run(spec: dict) -> dict:
    texts, batch = list(spec["texts"]), int(spec["batch"])
    marks = {"start": _maxrss_kib()}
    if spec["engine"] == "savedmodel":
        import tensorflow as tf
        import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)

        marks["imported"] = _maxrss_kib()
        serve = tf.saved_model.load(spec["export_dir"]).signatures["serving_default"]
        marks["loaded"] = _maxrss_kib()

        def send(request):
            reply = serve(texts=tf.constant(request))["translations"].numpy()
            return [t.decode("utf-8") for t in reply]
        threads = {"intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
                   "inter_op": tf.config.threading.get_inter_op_parallelism_threads()}
    elif spec["engine"] == "ctranslate2":
        from tf_nmt.inference.ctranslate2 import CTranslate2Translator, translate_sorted

        marks["imported"] = _maxrss_kib()
        engine = CTranslate2Translator(spec["export_dir"], **spec.get("ct2", {}))
        marks["loaded"] = _maxrss_kib()

        def send(request):
            return list(translate_sorted(engine, request, int(spec["beam"]),
                                         batch_size=len(request)))
        threads = engine.settings["threads"]
    else:
        raise ValueError(f"unknown engine {spec['engine']!r}")
    start = time.perf_counter()
    outputs = []
    for i in range(0, len(texts), batch):
        outputs += send(texts[i:i + batch])
    seconds = time.perf_counter() - start
    return {"maxrss_kib": _maxrss_kib(), "maxrss_kib_at": marks, "vm_hwm_kib": _vm_hwm_kib(),
            "sentences": len(outputs),
            "seconds": seconds, "tensorflow_imported": "tensorflow" in sys.modules,
            "threads": threads}


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    with open(args[0], encoding="utf-8") as f:
        spec = json.load(f)
    print(json.dumps(run(spec)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
