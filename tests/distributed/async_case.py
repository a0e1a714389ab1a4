"""Runs train_async cases on a fresh local parameter-server cluster and prints their reports as
JSON. A separate process, because connecting to a cluster rebinds TensorFlow's global eager
context for the rest of the process (the pytest process must stay local)."""
import json
import sys

import numpy as np

from tf_nmt.compat import keras, tf
from tf_nmt.distributed.async_sgd import train_async
from tf_nmt.distributed.ps_cluster import LocalPSCluster

TRUE_W = np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32)


def build():
    return keras.Sequential([keras.layers.Dense(1, input_shape=(4,))])


def dataset():
    x = np.random.default_rng(0).normal(size=(256, 4)).astype(np.float32)
    return tf.data.Dataset.from_tensor_slices((x, x @ TRUE_W)).repeat().batch(16)


def mse(model, batch):
    x, y = batch
    return tf.reduce_mean(tf.square(model(x) - y))


def main(cases):
    reports = []
    with LocalPSCluster(num_workers=2) as cluster:
        for case in cases:
            lines = []
            out = train_async(cluster.strategy, cluster.coordinator, build, mse, dataset,
                              lambda: keras.optimizers.SGD(0.05), num_workers=2,
                              log=lines.append, **case)
            report = dict(out["report"])
            report["progress_lines"] = lines
            report["kernel"] = out["model"].trainable_variables[0].numpy().ravel().tolist()
            reports.append(report)
        started = list(cluster._procs)
    reports.append({"servers_started": len(started),
                    "servers_left_running": sum(proc.poll() is None for proc in started)})
    print("REPORTS " + json.dumps(reports), flush=True)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
