"""The experiments: each study's code, README, results and plots in a folder of its own.

They run from a checkout, never from an install: ``python -m experiments NAME [ARGS]`` (from
the repository root) runs study ``NAME``; ``python -m experiments NAME --help`` lists its options.
The library (:mod:`tf_nmt`) never imports this package (``tests/architecture`` checks it).
``experiments/README.md`` is the index: finding, thesis figure, ours, command, results file.

Shared pieces live in :mod:`experiments.lib`: :mod:`~experiments.lib.common` (study config, real
batches of one rank, provenance-stamped results files, running ``tf-nmt``),
:mod:`~experiments.lib.curves` (BLEU of every checkpoint), :mod:`~experiments.lib.step_split`
(a training step split into compute and communication).
"""
from __future__ import annotations

import importlib
from typing import Dict, List, Optional, Sequence

from tf_nmt.errors import UsageError

STUDIES: Dict[str, str] = {
    "accumulation": "experiments.accumulation.study",
    "throughput": "experiments.throughput.study",
    "compression": "experiments.compression.study",
    "hvd-vs-single": "experiments.hvd_vs_single.study",
    "quantization": "experiments.quantization.study",
    "transfer": "experiments.transfer.study",
    "async": "experiments.async_sgd.study",
    "lowprec": "experiments.lowprec.study",
    "lowprec-kernels": "experiments.lowprec.kernels",
    "lowprec-translate": "experiments.lowprec.translate",
    "scaling": "experiments.scaling.study",
    "cluster": "experiments.scaling.cluster.cluster_cli",
    "chaos": "experiments.chaos.study",
    "chaos-stress": "experiments.chaos.stress",
    "train-speed": "experiments.train_speed.study",
    "serving-speed": "experiments.serving_speed.study",
    "serving-engines": "experiments.serving_speed.engines",
    "step-speed": "experiments.step_speed.study",
    "graddrop-warmup": "experiments.graddrop_warmup.study",
    "ops": "experiments.ops.bench",
    "own-corpus-prepare": "experiments.own_corpus.prepare",
    "own-corpus-memory": "experiments.own_corpus.memory",
    "own-corpus-pipeline": "experiments.own_corpus.pipeline",
    "own-corpus-resume": "experiments.own_corpus.resume",
    "own-corpus-stats": "experiments.own_corpus.corpus_stats",
    "wmt14-recipe": "experiments.wmt14_recipe.recipe",
    "second-pair": "experiments.second_pair.study",
    "plan-validate": "experiments.planning.validate",
}
# Studies whose --tiny option trains on the test suite's toy corpus (from a checkout only).
TINY_STUDIES = ("quantization", "lowprec", "chaos-stress")


def run_study(name: str, argv: Optional[Sequence[str]] = None) -> int:
    """Run study ``name`` with command-line arguments ``argv``; its exit status.

    The study module is imported here, by name, so that choosing one study does not import
    the others (and TensorFlow) up front.
    """
    if name not in STUDIES:
        raise UsageError(f"unknown study {name!r}: use one of {', '.join(STUDIES)}")
    module = importlib.import_module(STUDIES[name])
    args: List[str] = list(argv) if argv is not None else []
    if name in TINY_STUDIES:
        from tests.helpers import write_toy_data_dir  # noqa: PLC0415 - the checkout's toy corpus

        return int(module.main(args, toy_data=write_toy_data_dir) or 0)
    return int(module.main(args) or 0)
