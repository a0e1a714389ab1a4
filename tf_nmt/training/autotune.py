"""Pick the faster of float32 and mixed bfloat16 training on this machine by timing real steps.

Which precision trains faster on a CPU depends on the CPU, not on the model: bfloat16 halves the
matmul cost only where the CPU has fast bfloat16 dot products, and the rest of the step
(element-wise ops, casts) does not get cheaper. ``python -m experiments train-speed`` measured bf16 at
0.67x of float32 on one 2-core Xeon here, while issue 17 reported 1.5x on
another machine of the same offer. So ``tf-nmt quickstart`` does not guess: it times both on
the run's own batches (:func:`fastest_precision`) and trains with the faster.

The probe builds its own models and never touches the run directory; the trainer re-seeds
everything when it starts, so the run is the same as one started with the chosen setting.
"""
from __future__ import annotations

import gc
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict

from tf_nmt.compat import tf
from tf_nmt.config import Config
from tf_nmt.data.sample import sample_batches
from tf_nmt.training.precision import policy_for_device
from tf_nmt.training.trainer import build_and_compile, validate_config

PRECISIONS = ("float32", "mixed_bfloat16")


@dataclass
class PrecisionChoice:
    """The probe's outcome: ``mixed_precision`` to train with and the s/step behind it."""

    mixed_precision: bool
    s_per_step: Dict[str, float] = field(default_factory=dict)
    rounds: int = 0
    probe_seconds: float = 0.0

    def as_dict(self) -> Dict[str, Any]:
        return {"chosen": PRECISIONS[int(self.mixed_precision)], "s_per_step": self.s_per_step,
                "rounds": self.rounds, "probe_seconds": round(self.probe_seconds, 1)}


def fastest_precision(cfg: Config, batches: int = 4, rounds: int = 2,
                      log: Callable[[str], None] = print) -> PrecisionChoice:
    """Time training steps of ``cfg``'s model in float32 and in mixed bfloat16 on the same
    ``batches`` real batches: one untimed pass each (tracing, kernel set-up), then ``rounds``
    alternating timed passes. Returns the faster (float32 on a tie: it is the more exact).
    """
    if batches < 1 or rounds < 1:
        raise ValueError("batches and rounds must be >= 1")
    start = time.perf_counter()
    plan = validate_config(cfg)
    tokenizer, data = sample_batches(cfg.data, batches, pairs_per_rank=4000)
    vocab_size = tokenizer.vocab_size
    steps: Dict[str, Callable] = {}
    for name, mixed in zip(PRECISIONS, (False, True)):  # the same cfg, the policy as a value
        model = build_and_compile(cfg, vocab_size, plan=plan, policy=policy_for_device(mixed))
        steps[name] = tf.function(model.train_step, reduce_retracing=True)
    for step in steps.values():  # untimed: tracing and oneDNN primitive creation
        for batch in data:
            step(batch)
    seconds: Dict[str, float] = {name: 0.0 for name in steps}
    for r in range(rounds):
        order = list(steps) if r % 2 == 0 else list(reversed(list(steps)))
        for name in order:
            t0 = time.perf_counter()
            for batch in data:
                out = steps[name](batch)
            float(out["loss"])  # wait for the last step
            seconds[name] += time.perf_counter() - t0
    per_step = {name: round(s / (rounds * len(data)), 4) for name, s in seconds.items()}
    steps.clear()  # drops the probe models (no clear_session: other models may be alive)
    gc.collect()
    choice = PrecisionChoice(per_step["mixed_bfloat16"] < per_step["float32"], per_step, rounds,
                             time.perf_counter() - start)
    log(f"precision probe ({len(data)} batches x {rounds} rounds, {choice.probe_seconds:.0f} s): "
        f"float32 {per_step['float32']:.3f} s/step, mixed bfloat16 "
        f"{per_step['mixed_bfloat16']:.3f} s/step -> {choice.as_dict()['chosen']}")
    return choice
