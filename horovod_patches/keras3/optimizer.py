"""A Keras 3 optimizer wrapper that averages gradients across Horovod ranks before each update.

Mechanism: Keras 3's TensorFlow ``train_step`` computes the gradients with a ``tf.GradientTape``
and calls ``model.optimizer.apply_gradients(zip(grads, vars))``, which calls
``optimizer.apply(grads, vars)``. :class:`DistributedOptimizer` is a ``keras.optimizers.Optimizer``
(so ``model.compile`` accepts it) that holds the user's optimizer and overrides ``apply``: the
gradients are averaged with ``horovod.tensorflow`` collectives, then handed to the wrapped
optimizer's own ``apply``. Everything runs inside Keras's ``tf.function`` train step.

With ``backward_passes_per_step = k > 1`` the wrapper keeps one local accumulator per trainable
variable: every ``apply`` adds the local gradients, and every ``k``-th one averages the
accumulated mean (sum / k) across ranks, applies it and zeroes the accumulators. All ranks count
the same passes, so they take the same branch and issue the same collectives.

Step counters:

* ``optimizer.iterations`` (the wrapped optimizer's) counts **updates**: with ``k`` passes per
  update it advances once every ``k`` batches. Learning-rate schedules, which the wrapped
  optimizer evaluates at its own ``iterations``, therefore see update steps. With
  ``count_passes=True`` it advances on every batch instead, as Horovod's Keras 2 wrapper does
  (schedules and Adam's bias correction then see batch counts);
* ``optimizer.backward_passes`` counts every ``apply`` call (every batch).
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence

import keras
import tensorflow as tf

import horovod.tensorflow as hvd


def _is_sparse(grad: Any) -> bool:
    return isinstance(grad, tf.IndexedSlices)


def _dense(grad: Any) -> tf.Tensor:
    return tf.convert_to_tensor(grad) if _is_sparse(grad) else grad


class _ById:
    """A dict by ``id()`` that TensorFlow's checkpoint tracking leaves alone."""

    def __init__(self, items: dict) -> None:
        self.items = items

    def __contains__(self, key: int) -> bool:
        return key in self.items

    def __getitem__(self, key: int) -> Any:
        return self.items[key]


@keras.saving.register_keras_serializable(package="horovod_patches")
class DistributedOptimizer(keras.optimizers.Optimizer):
    """Wrap a Keras 3 ``optimizer`` so that every update uses gradients averaged over all ranks.

    Args:
        optimizer: a built-in or custom ``keras.optimizers.Optimizer`` (not yet used).
        sparse_as_dense: convert ``tf.IndexedSlices`` gradients (embeddings) to dense tensors and
            average them with the dense ones in one grouped allreduce. ``False`` averages them as
            ``IndexedSlices``: every rank allgathers the others' rows (values / size), which
            sends less than a dense allreduce only when few rows are touched per batch.
        backward_passes_per_step: ``k``: average and apply every ``k``-th call, with the mean of
            the ``k`` local gradients (the same update as one pass over a batch ``k`` times as
            large, for mean-reduced losses and equal batch sizes). Accumulators are dense.
        compression: ``horovod.tensorflow.Compression.none`` (default) or ``.fp16`` for the
            dense allreduce.
        count_passes: with ``k > 1``, advance ``iterations`` on the ``k - 1`` batches that do
            not update too (Horovod's Keras 2 semantics: code that counts batches by
            ``iterations``, e.g. to skip the data a resumed run has seen, works unchanged).
        name: optional name.
    """

    def __init__(self, optimizer: keras.optimizers.Optimizer, sparse_as_dense: bool = True,
                 backward_passes_per_step: int = 1, compression: Any = None,
                 count_passes: bool = False, name: Optional[str] = None, **kwargs: Any) -> None:
        if not isinstance(optimizer, keras.optimizers.Optimizer):
            raise TypeError(
                f"DistributedOptimizer wraps a Keras 3 optimizer (keras.optimizers.Optimizer), "
                f"got {type(optimizer).__module__}.{type(optimizer).__name__}; a tf_keras "
                "optimizer goes with horovod_patches.keras instead")
        if isinstance(optimizer, DistributedOptimizer):
            raise ValueError("the optimizer is already a DistributedOptimizer")
        if int(backward_passes_per_step) < 1:
            raise ValueError(
                f"backward_passes_per_step must be >= 1, got {backward_passes_per_step}")
        if optimizer.built:
            raise ValueError("wrap the optimizer before it is used (it is already built)")
        if getattr(optimizer, "gradient_accumulation_steps", None) and backward_passes_per_step > 1:
            raise ValueError("use backward_passes_per_step or the wrapped optimizer's "
                             "gradient_accumulation_steps, not both")
        if kwargs:
            raise ValueError(f"DistributedOptimizer does not take {sorted(kwargs)}: set them on "
                             "the wrapped optimizer")
        super().__init__(learning_rate=0.0, name=name or f"distributed_{optimizer.name}")
        self.inner_optimizer = optimizer
        self.sparse_as_dense = bool(sparse_as_dense)
        self.backward_passes_per_step = int(backward_passes_per_step)
        self.count_passes = bool(count_passes)
        self.compression = compression if compression is not None else hvd.Compression.none

    # --- variables ---------------------------------------------------------------------------
    def build(self, var_list: Sequence[Any]) -> None:
        if self.built:
            return
        self.inner_optimizer.build(var_list)
        super().build(var_list)  # own iterations/learning-rate bookkeeping and variable index
        self._pass_counter = self.add_variable(shape=(), dtype="int64", initializer="zeros",
                                               aggregation="none", name="backward_passes")
        accumulators = []
        if self.backward_passes_per_step > 1:
            accumulators = [self.add_variable_from_reference(var, name="hvd_accumulator")
                            for var in var_list]
        # by the identity of the model's variables (train_step passes the same objects); in a
        # plain holder, since TensorFlow's tracking cannot checkpoint a dict with int keys (the
        # accumulators themselves are saved as the optimizer's variables)
        self._accumulator_of = _ById({id(var): acc for var, acc in zip(var_list, accumulators)})
        self.built = True

    @property
    def variables(self) -> List[Any]:
        return list(self._variables) + list(self.inner_optimizer.variables)

    @property
    def backward_passes(self) -> Any:
        """Number of ``apply`` calls (batches) so far; ``iterations`` counts updates."""
        return self._pass_counter

    # --- delegated state ---------------------------------------------------------------------
    @property
    def iterations(self) -> Any:
        return self.inner_optimizer.iterations

    @property
    def learning_rate(self) -> Any:
        return self.inner_optimizer.learning_rate

    @learning_rate.setter
    def learning_rate(self, value: Any) -> None:
        self.inner_optimizer.learning_rate = value

    def scale_loss(self, loss: Any) -> Any:
        return self.inner_optimizer.scale_loss(loss)

    def finalize_variable_values(self, var_list: Any) -> None:
        self.inner_optimizer.finalize_variable_values(var_list)

    # --- averaging ---------------------------------------------------------------------------
    def _average(self, grads: Sequence[Any]) -> List[Any]:
        """``grads`` (None kept) averaged over all ranks."""
        if hvd.size() == 1:
            return list(grads)
        out: List[Any] = list(grads)
        dense_idx, sparse_idx = [], []
        for i, grad in enumerate(grads):
            if grad is None:
                continue
            if _is_sparse(grad) and not self.sparse_as_dense:
                sparse_idx.append(i)
            else:
                dense_idx.append(i)
        if dense_idx:
            reduced = hvd.grouped_allreduce([_dense(grads[i]) for i in dense_idx], op=hvd.Average,
                                            compression=self.compression)
            for i, value in zip(dense_idx, reduced):
                out[i] = value
        for i in sparse_idx:
            grad = grads[i]
            # the mean of sum-of-slices: every rank's rows, each scaled by 1/size; duplicate
            # indices are summed by the optimizer's scatter update
            values = hvd.allgather(grad.values / tf.cast(hvd.size(), grad.values.dtype))
            indices = hvd.allgather(grad.indices)
            out[i] = tf.IndexedSlices(values, indices, dense_shape=grad.dense_shape)
        return out

    def apply(self, grads: Sequence[Any], trainable_variables: Optional[Sequence[Any]] = None
              ) -> None:
        grads = list(grads)
        if not grads:
            return
        if not self.built:
            if trainable_variables is None:
                raise ValueError("build the optimizer or pass the variables with the gradients")
            self.build(list(trainable_variables))
        variables = list(trainable_variables if trainable_variables is not None
                         else self._trainable_variables)
        self._pass_counter.assign_add(1)
        if self.backward_passes_per_step == 1:
            self.inner_optimizer.apply(self._average(grads), variables)
            return

        k = self.backward_passes_per_step
        missing = [v.name for v in variables if id(v) not in self._accumulator_of]
        if missing:
            raise ValueError(f"variables the optimizer was not built with: {missing}")
        accs = [self._accumulator_of[id(v)] for v in variables]
        for acc, grad in zip(accs, grads):
            if grad is not None:
                acc.assign_add(tf.cast(_dense(grad), acc.dtype))

        def update() -> None:
            means = [None if g is None else acc / k for acc, g in zip(accs, grads)]
            self.inner_optimizer.apply(self._average(means), variables)
            for acc in accs:
                acc.assign(tf.zeros(acc.shape, acc.dtype))

        def skip() -> None:
            if self.count_passes:
                self.inner_optimizer.iterations.assign_add(1)

        # the counter is the same on every rank, so all ranks run the same collectives
        tf.cond(tf.equal(self._pass_counter % k, 0), update, skip)

    def apply_gradients(self, grads_and_vars: Any) -> Any:
        grads, variables = zip(*grads_and_vars)
        self.apply(list(grads), list(variables))
        return self.iterations

    def stateless_apply(self, optimizer_variables: Any, grads: Any, trainable_variables: Any):
        raise NotImplementedError("DistributedOptimizer runs on the TensorFlow backend only")

    # --- serialization -----------------------------------------------------------------------
    def get_config(self) -> dict:
        if self.compression not in (hvd.Compression.none, hvd.Compression.fp16):
            raise ValueError("only Compression.none and Compression.fp16 can be saved")
        return {
            "name": self.name,
            "optimizer": keras.saving.serialize_keras_object(self.inner_optimizer),
            "sparse_as_dense": self.sparse_as_dense,
            "backward_passes_per_step": self.backward_passes_per_step,
            "count_passes": self.count_passes,
            "compression": "fp16" if self.compression is hvd.Compression.fp16 else "none",
        }

    @classmethod
    def from_config(cls, config: dict, custom_objects: Any = None) -> "DistributedOptimizer":
        config = dict(config)
        inner = keras.saving.deserialize_keras_object(config.pop("optimizer"),
                                                      custom_objects=custom_objects)
        compression = config.pop("compression", "none")
        config["compression"] = (hvd.Compression.fp16 if compression == "fp16"
                                 else hvd.Compression.none)
        return cls(inner, **config)
