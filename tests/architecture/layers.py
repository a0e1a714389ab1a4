"""The declared layer order of ``tf_nmt``: which parts of the package may import which.

A *part* is a subpackage (``tf_nmt.models``) or a top-level module (``tf_nmt.config``); the
package's own ``__init__`` is the part ``tf_nmt``. A module may import modules of its own part and
of parts in lower layers (earlier in :data:`LAYERS`), never of a higher one. Every import counts,
function-level ones too (the graph of :mod:`tests.architecture.import_graph`), so imports between
parts run one way only, and each part can be read and tested with only the layers below it.

A new part must be given its place here; a change that needs a lower part to import a higher one
moves the code instead (down to where both can import it).
"""
from __future__ import annotations

from typing import Dict, List, Sequence, Set, Tuple

from tests.architecture.import_graph import PACKAGE

#: Lowest first.
LAYERS: Tuple[str, ...] = (
    "tf_nmt",        # the package __init__: the facts of the Keras choice, without TensorFlow
    "errors",        # UserError: what the CLI prints as one line
    "utils",         # atomic file writes, the machine record, allocator
    "compat",        # tf and the chosen Keras (3 or 2), for everything above
    "modes",         # the registry of comm modes and schedules: their keys, what each supports
    "config",        # config keys, types, presets; ConfigError
    "config_usage",  # which config keys each mode uses: the refusal table (tf_nmt.config_usage)
    "ops",           # the C++ op library and its Python wrappers
    "data",          # built-in and own corpora, data dir reading, tokenizer, tf.data pipeline
    "models",        # Transformer, GNMT, their layers; the activation quantiser (activation_quant/)
    "quantization",  # low-bit weight codecs, packed files, re-training under quantisation
    "distributed",   # process context, collectives, gradient communication, byte accounting
    "planning",      # tf-nmt plan's performance model: alpha-beta collectives, probe, byte counts
    "inference",     # what reads an export: formats, the serving graph, CTranslate2 translation
    "run_dir",       # a run directory: layout, resume guard, building and restoring its model
    "evaluation",    # beam-search translation, BLEU
    "export",        # the string-to-string SavedModel
    "training",      # the trainers (re-training under quantisation is a quantization callback)
    "commands",      # one typed function per tf-nmt verb; the CLI and the quickstart call them
    "cli",           # the tf-nmt command line
    "__main__",      # python -m tf_nmt
)


def part_of(module: str) -> str:
    """``tf_nmt.models.gnmt`` -> ``models``, ``tf_nmt.config`` -> ``config``, ``tf_nmt`` -> ``tf_nmt``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == PACKAGE else parts[0]


def undeclared(graph: Dict[str, Set[str]], layers: Sequence[str] = LAYERS) -> List[str]:
    """The modules whose part has no place in ``layers``."""
    return sorted(m for m in graph if part_of(m) not in layers)


def upward_imports(graph: Dict[str, Set[str]], layers: Sequence[str] = LAYERS
                   ) -> List[Tuple[str, str]]:
    """(importer, imported) for every import of a module in a higher layer than the importer's
    (parts missing from ``layers`` are left to :func:`undeclared`)."""
    rank = {part: i for i, part in enumerate(layers)}
    found = []
    for module, targets in graph.items():
        low = rank.get(part_of(module))
        for target in targets:
            high = rank.get(part_of(target))
            if low is not None and high is not None and high > low:
                found.append((module, target))
    return sorted(found)
