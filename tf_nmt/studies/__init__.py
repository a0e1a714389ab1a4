"""Experiments as an importable package: each study module builds its command line
(``main(argv)``), runs its measurements and writes a results file under ``results/``.

The scripts in ``scripts/`` and ``tf-nmt study NAME`` are thin entry points over these modules.
The scaling study (:mod:`.scaling`) drives the emulated cluster of :mod:`tf_nmt.scaling`.

=================  ============================================================  ===========================
study              what it measures                                               module
=================  ============================================================  ===========================
accumulation       bytes Horovod moves and accumulates, sparse_as_dense off/on    :mod:`.accumulation`
throughput         tokens/s per rank and in total, compute/communication split    :mod:`.throughput`
compression        BLEU vs step/time of the comm modes under horovodrun            :mod:`.compression`
hvd-vs-single      BLEU of N Horovod ranks against one process, same batch         :mod:`.hvd_vs_single`
quantization       log-quantised models: scale, bits, re-training, export          :mod:`.quantization`
transfer           parent-to-child initialisation, steps to a dev BLEU threshold   :mod:`.transfer`
async              sync vs async SGD vs async with global accumulation             :mod:`.asynchronous`
lowprec            Table 7.4: BLEU of 4-bit weights and + 4-bit dot products      :mod:`.lowprec`
lowprec-kernels    ns per 128-element dot: fp32, int8 VNNI, log shift16/lut8      :mod:`.lowprec_bench`
lowprec-translate  sentences/s and BLEU with fp32, int8, log-space matmuls        :mod:`.lowprec_translate`
chaos              elastic run with random worker kills, resume, bad inputs        :mod:`.chaos`
train-speed        training tok/s of variants and of OpenNMT-tf, alternating       :mod:`.train_speed`
serving-speed      exported translator: sentences/s by request size and length    :mod:`.serving_speed`
step-speed         the train step on fixed shapes: fp32/bf16/XLA, op profile       :mod:`.step_speed`
graddrop-warmup    graddrop's exchange in the warm-up: allgather vs dense fallback :mod:`.graddrop_warmup`
=================  ============================================================  ===========================

Shared pieces: :mod:`.common` (config, real batches of one rank, result files, running
``tf-nmt``), :mod:`.curves` (BLEU of every checkpoint), :mod:`.step_split` (a training step
split into compute and communication, also used by :mod:`tf_nmt.scaling.worker`).
"""
from __future__ import annotations

import importlib
from typing import Dict, List, Optional, Sequence

from tf_nmt.errors import UsageError

STUDIES: Dict[str, str] = {
    "accumulation": "tf_nmt.studies.accumulation",
    "throughput": "tf_nmt.studies.throughput",
    "compression": "tf_nmt.studies.compression",
    "hvd-vs-single": "tf_nmt.studies.hvd_vs_single",
    "quantization": "tf_nmt.studies.quantization",
    "transfer": "tf_nmt.studies.transfer",
    "async": "tf_nmt.studies.asynchronous",
    "lowprec": "tf_nmt.studies.lowprec",
    "lowprec-kernels": "tf_nmt.studies.lowprec_bench",
    "lowprec-translate": "tf_nmt.studies.lowprec_translate",
    "scaling": "tf_nmt.studies.scaling",
    "chaos": "tf_nmt.studies.chaos",
    "train-speed": "tf_nmt.studies.train_speed",
    "serving-speed": "tf_nmt.studies.serving_speed",
    "step-speed": "tf_nmt.studies.step_speed",
    "graddrop-warmup": "tf_nmt.studies.graddrop_warmup",
}


def run_study(name: str, argv: Optional[Sequence[str]] = None) -> int:
    """Run study ``name`` with command-line arguments ``argv``; its exit status.

    The study module is imported here, by name, so that choosing one study does not import
    the others (and TensorFlow) up front.
    """
    if name not in STUDIES:
        raise UsageError(f"unknown study {name!r}: use one of {', '.join(STUDIES)}")
    module = importlib.import_module(STUDIES[name])
    args: List[str] = list(argv) if argv is not None else []
    return int(module.main(args) or 0)
