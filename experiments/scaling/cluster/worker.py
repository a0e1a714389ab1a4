"""One rank of a scaling measurement (``python -m experiments.scaling.cluster.worker``, under any Horovod
launcher): times training steps of the configured model on fixed-shape synthetic batches.

Two models are built from the same config: one through the distributed optimizer of the chosen
comm mode (what ``tf-nmt train`` runs) and one with this process's context only, so its steps
skip the gradient exchange. Both are timed in alternating blocks, each block started by a barrier,
so all ranks run the same kind of step at the same time (the same CPU contention in both). Then

    step      = time of a distributed step (what training pays)
    compute   = time of the same step without the exchange
    comm      = step - compute (exchange + waiting for the slowest rank)

Each is the minimum (``--estimator min``, default) or the median over the timed steps, averaged
over ranks. On a machine shared with other work, step times only ever get longer than the
undisturbed time, so the minimum is the steadier estimate; both are written.

Synthetic batches (uniform random token ids, fixed lengths) make every step the same size, so
throughput does not depend on bucketing or the corpus; tokens are counted on the target side,
like the trainer's tokens/s.

With ``--link-iface IFACE`` (an emulated host's ``eth0``) each rank reads the bytes its network
namespace has sent on IFACE (``/proc/net/dev``) just before and after every timed block of
distributed steps, so the count holds those steps only: no rendezvous, broadcast, barriers,
warm-up or exchange-free blocks. Beside it goes the gradient payload the comm accounting predicts
(:func:`tf_nmt.distributed.accounting.link_send_bytes`); the difference is protocol headers and
Horovod's control messages during the steps.

With ``--exchange-steps K`` the exchange is also timed alone, after the steps above: each
model applies one fixed gradient (this rank's real gradient of the batch, computed once) through
the same optimizer call Keras's ``train_step`` makes, with a loss whose backward pass is a
multiply (so the update gets exactly that gradient, sparse rows staying sparse). K calls of each
kind, in alternating blocks, every call released on all ranks together by a barrier, so

    exchange_only = update through the distributed optimizer - the same update without it

holds the collective and the exchange's own CPU work but not the time a rank waits for another's
slower backward pass (``comm`` above holds both). After each barrier every rank waits the same
offset, spread over Horovod's cycle across the calls, before the timed call, so the collective
meets Horovod's loop at a random phase of its cycle, as in training (:func:`time_exchange_alone`).
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional


def _args(argv: Optional[List[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default=None)
    p.add_argument("--set", dest="overrides", action="append", default=[])
    p.add_argument("--batch-sentences", type=int, required=True, help="per-worker batch")
    p.add_argument("--src-len", type=int, default=24)
    p.add_argument("--tgt-len", type=int, default=24)
    p.add_argument("--vocab-size", type=int, default=8000)
    p.add_argument("--warmup", type=int, default=3, help="untimed steps of each kind")
    p.add_argument("--steps", type=int, default=10, help="timed steps of each kind")
    p.add_argument("--block", type=int, default=5, help="steps per timed block")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--estimator", choices=("min", "median"), default="min")
    p.add_argument("--out", type=Path, required=True, help="rank 0 writes this JSON")
    p.add_argument("--exchange-steps", type=int, default=0,
                   help="also time the exchange alone, this many updates of each kind (0: not)")
    p.add_argument("--no-phase-offsets", dest="phase_offsets", action="store_false",
                   help="start each exchange-alone update right after its barrier (default: "
                        "after a wait spread over Horovod's cycle, as in training)")
    p.add_argument("--link-iface", default=None,
                   help="count the bytes sent on this interface during the distributed steps")
    return p.parse_args(argv)


def sent_bytes(iface: str, table: Optional[str] = None) -> int:
    """Bytes this process's network namespace has sent on ``iface`` (``/proc/net/dev``)."""
    text = table if table is not None else Path("/proc/net/dev").read_text()
    for line in text.splitlines():
        name, sep, fields = line.partition(":")
        if sep and name.strip() == iface:
            return int(fields.split()[8])  # 8 receive columns, then transmitted bytes
    raise ValueError(f"no interface {iface!r} in /proc/net/dev")


def _batch(tf, rng, batch: int, src_len: int, tgt_len: int, vocab: int):
    """A fixed-shape batch of random ids in [4, vocab) (no padding, so every token counts)."""
    def ids(length):
        return tf.constant(rng.integers(4, vocab, size=(batch, length)), tf.int32)
    return {"source": ids(src_len), "target_in": ids(tgt_len)}, ids(tgt_len)


def _timed(model, x, y, steps: int, after_step: Optional[Callable[[], None]] = None) -> List[float]:
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        model.train_on_batch(x, y)  # returns numpy values: the step has finished
        times.append(time.perf_counter() - t0)
        if after_step is not None:
            after_step()
    return times


def fixed_gradient_update(tf, model, grads: list, keras3: bool) -> Callable[[], None]:
    """A compiled update of ``model`` by ``grads`` through its optimizer, as ``train_step`` calls
    it on this Keras version (Keras 2: ``minimize`` with the tape; Keras 3: ``apply_gradients``);
    the loss is linear in the variables, so its gradient is ``grads`` (sparse rows kept)."""
    variables = model.trainable_variables

    def term(v, g):
        if isinstance(g, tf.IndexedSlices):
            return tf.reduce_sum(tf.gather(v, g.indices) * g.values)
        return tf.reduce_sum(v * g)

    @tf.function
    def update():
        with tf.GradientTape() as tape:
            loss = tf.add_n([term(v, g) for v, g in zip(variables, grads)])
        if keras3:
            model.optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        else:
            model.optimizer.minimize(loss, variables, tape=tape)

    return update


def batch_gradients(tf, model, x, y) -> list:
    """``model``'s gradient of the token cross-entropy on one batch (dense or IndexedSlices, as
    the model's own backward pass makes them)."""
    with tf.GradientTape() as tape:
        logits = tf.cast(model(x, training=True), tf.float32)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
    return tape.gradient(loss, model.trainable_variables)


#: the golden ratio's fractional part: k * PHI mod 1 spreads any K offsets evenly over [0, 1)
PHI = 0.6180339887498949


def phase_offsets(count: int, cycle_s: float) -> List[float]:
    """``count`` waits in [0, ``cycle_s``), spread evenly over the cycle (k * PHI mod 1): the
    same on every rank, as they depend on the call's index only."""
    return [cycle_s * ((k + 1) * PHI % 1.0) for k in range(count)]


def time_exchange_alone(tf, full, local, x, y, ctx, steps: int, block: int,
                        keras3: bool, cycle_s: float = 0.0) -> Dict[str, object]:
    """Times of ``full``'s and ``local``'s update by one fixed gradient, each call started on all
    ranks by a barrier, in alternating blocks; and their paired difference, the exchange alone
    (median over blocks of the block's median update with it - the preceding one's without).

    The barrier is a Horovod collective, so it returns just after a tick of Horovod's loop and
    the ranks' ticks go on every ``cycle_s`` from there: an update started right after it would
    hand its collective to the loop at the same phase of the cycle every time (the update's
    work before the collective, mod the cycle), which decides how long it waits for the next
    tick. In training the work before the exchange (forward and backward) is many cycles long
    and varies, so the phase is random: half a cycle on average. So after each barrier every
    rank waits the same ``phase_offsets`` (a whole cycle spread evenly over the calls) before
    the timed call, as untimed time."""
    from experiments.lib.step_split import paired_difference  # noqa: PLC0415
    from tf_nmt import distributed  # noqa: PLC0415

    grads = batch_gradients(tf, local, x, y)
    updates = [fixed_gradient_update(tf, m, grads, keras3) for m in (full, local)]
    for update in updates:  # trace both and make any optimizer state
        distributed.barrier(ctx)
        update()
    offsets = phase_offsets(steps, cycle_s)
    with_times: List[float] = []
    without_times: List[float] = []
    while len(with_times) < steps:
        n = min(block, steps - len(with_times))
        for update, times in ((updates[1], without_times), (updates[0], with_times)):
            for _ in range(n):
                wait = offsets[len(times)]
                distributed.barrier(ctx)
                if wait > 0:
                    time.sleep(wait)
                t0 = time.perf_counter()
                update()
                times.append(time.perf_counter() - t0)
    alone = paired_difference(with_times, without_times, block)
    return {"exchange_only_s": distributed.allreduce_mean(alone, ctx, name="exchange_only"),
            "exchange_phase_offsets_s": offsets,
            "rank0_exchange_update_times_s": with_times,
            "rank0_local_update_times_s": without_times}


def run(args: argparse.Namespace) -> Optional[Dict[str, object]]:
    import numpy as np  # noqa: PLC0415

    from tf_nmt import distributed  # noqa: PLC0415
    from tf_nmt.compat import KERAS3, tf  # noqa: PLC0415
    from tf_nmt.config import load_config, preset  # noqa: PLC0415
    from tf_nmt.distributed import accounting  # noqa: PLC0415
    from tf_nmt.distributed.context import horovod_cycle_time  # noqa: PLC0415
    from tf_nmt.distributed.comm.optimizer import exchange_of  # noqa: PLC0415
    from experiments.lib.step_split import StepSplit, with_and_without_exchange  # noqa: PLC0415

    if args.batch_sentences < 1 or args.steps < 1 or args.block < 1 or args.exchange_steps < 0:
        raise ValueError("--batch-sentences, --steps and --block must be >= 1, "
                         "--exchange-steps >= 0")
    ctx = distributed.init(enabled=True)
    cfg = load_config(overrides=args.overrides, base=preset(args.preset) if args.preset else None)
    tf.random.set_seed(args.seed + ctx.rank)
    rng = np.random.default_rng(args.seed + 1000 * ctx.rank)
    x, y = _batch(tf, rng, args.batch_sentences, args.src_len, args.tgt_len, args.vocab_size)
    full, local = with_and_without_exchange(cfg, args.vocab_size, ctx)
    if args.link_iface:
        sent_bytes(args.link_iface)  # an unknown interface fails before any timing
    for model in (full, local):
        distributed.barrier(ctx)
        _timed(model, x, y, args.warmup)
    exchange = exchange_of(full.optimizer)  # graddrop's: it counts the bytes it hands over
    payloads: List[int] = []

    def record_payload() -> None:
        payloads.append(int(exchange.sent_bytes.numpy()))

    step_times: List[float] = []
    compute_times: List[float] = []
    link_sent = 0
    while len(step_times) < args.steps:
        n = min(args.block, args.steps - len(step_times))
        distributed.barrier(ctx)
        compute_times += _timed(local, x, y, n)
        distributed.barrier(ctx)
        before = sent_bytes(args.link_iface) if args.link_iface else 0
        step_times += _timed(full, x, y, n, record_payload if exchange is not None else None)
        link_sent += sent_bytes(args.link_iface) - before if args.link_iface else 0
    cycle_s = horovod_cycle_time() / 1e3 if args.phase_offsets else 0.0
    alone = (time_exchange_alone(tf, full, local, x, y, ctx, args.exchange_steps, args.block,
                                 KERAS3, cycle_s) if args.exchange_steps and ctx.size > 1 else {})
    # every rank's statistics, averaged (ranks run in lock-step, so they differ little)
    stats = {}
    for label, fn in (("min", min), ("median", statistics.median)):
        stats[f"step_{label}_s"] = distributed.allreduce_mean(fn(step_times), ctx, name=f"s_{label}")
        stats[f"compute_{label}_s"] = distributed.allreduce_mean(fn(compute_times), ctx,
                                                                 name=f"c_{label}")
    split = StepSplit(stats[f"step_{args.estimator}_s"], stats[f"compute_{args.estimator}_s"])
    if ctx.size > 1:
        payload = (sum(payloads) / len(payloads) if payloads
                   else accounting.variables_bytes(full.trainable_variables))
        payload = distributed.allreduce_mean(payload, ctx, name="payload")
        stats["payload_bytes_per_step"] = payload
        stats["predicted_link_bytes_per_step"] = accounting.link_send_bytes(cfg.train.comm, payload,
                                                                           ctx.size)
        if args.link_iface:
            per_step = link_sent / len(step_times)
            stats["link_bytes_per_step"] = distributed.allreduce_mean(per_step, ctx, name="link")
            stats["link_iface"] = args.link_iface
    tokens_per_worker = args.batch_sentences * args.tgt_len
    result = {
        "world": ctx.size, "per_worker_sentences": args.batch_sentences,
        "src_len": args.src_len, "tgt_len": args.tgt_len, "vocab_size": args.vocab_size,
        "global_tokens_per_step": tokens_per_worker * ctx.size,
        "step_s": split.step_s, "compute_s": split.compute_s, "comm_s": split.comm_s,
        "comm_s_raw": split.comm_s_raw,  # negative when timing noise exceeds the exchange
        "tokens_per_s": tokens_per_worker * ctx.size / split.step_s,
        "num_parameters": int(sum(int(np.prod(v.shape)) for v in full.trainable_variables)),
        "estimator": args.estimator, **stats, **alone,
        "rank0_step_times_s": step_times, "rank0_compute_times_s": compute_times,
        "overrides": args.overrides, "preset": args.preset,
    }
    if ctx.is_chief:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.out.with_name(args.out.name + ".tmp")
        tmp.write_text(json.dumps(result, indent=2))
        tmp.replace(args.out)
    return result


def main(argv: Optional[List[str]] = None) -> None:
    run(_args(argv))


if __name__ == "__main__":
    main()
