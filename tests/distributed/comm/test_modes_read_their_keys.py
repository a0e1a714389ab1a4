"""The comm-mode registry (tf_nmt.modes) against what the code reads: a mode's mode-specific
keys (``CommMode.keys_used``) must each be read while the mode trains, so the refusal table
built from the registry cannot claim a key the code has stopped using. Each mode is wired for
one process (tf_nmt.distributed.comm.wiring), a step taken and its callbacks run past a sync,
with the settings recording every field read; and each registry fact is defined once."""
from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from tf_nmt import modes
from tf_nmt.compat import keras, tf
from tests.helpers import plain_sgd
from tf_nmt.config import load_config
from tf_nmt.distributed.comm import settings as comm_settings
from tf_nmt.distributed.comm.wiring import comm_callbacks, wrap_optimizer
from tf_nmt.distributed.context import SINGLE

pytestmark = pytest.mark.keras2  # also in CI's Keras 2 pass

#: train.* key -> the CommSettings field holding it.
FIELD = {"drop_threshold": "per_tensor", "bmuf_block_momentum": "block_momentum",
         "bmuf_block_lr": "block_lr", "bmuf_nesterov": "nesterov"}


class Recording(comm_settings.CommSettings):
    """CommSettings that remembers which fields were read."""

    def __getattribute__(self, name):
        if not name.startswith("_") and name in comm_settings.CommSettings.__dataclass_fields__:
            object.__getattribute__(self, "_read").add(name)
        return object.__getattribute__(self, name)


def fields_read(mode: str, local_gradients: bool) -> set:
    overrides = [f"train.comm={mode}"]
    if modes.averages_parameters(mode, local_gradients):
        overrides.append("train.average_every=2")  # a sync within the few steps taken
    if mode == "graddrop":
        overrides += ["train.drop_warmup_steps=1"] + (
            ["train.local_gradients=true"] if local_gradients else [])
    plain = comm_settings.resolve_comm(load_config(None, overrides).train)
    settings = Recording(**{f: getattr(plain, f) for f in plain.__dataclass_fields__})
    object.__setattr__(settings, "_read", set())
    model = keras.Sequential([keras.layers.Dense(3, input_shape=(4,))])
    optimizer = wrap_optimizer(plain_sgd(0.1), settings, SINGLE)
    callbacks = comm_callbacks(settings, SINGLE, log=lambda _m: None)
    model.compile(optimizer=optimizer, loss="mse")
    x, y = np.ones((8, 4), np.float32), np.zeros((8, 3), np.float32)
    model.fit(x, y, batch_size=2, epochs=1, verbose=0, callbacks=callbacks)
    return object.__getattribute__(settings, "_read")


CASES = [(m, False) for m in modes.COMM_MODES] + [("graddrop", True)]


@pytest.mark.parametrize("mode, local_gradients", CASES)
def test_every_key_a_mode_claims_is_read(mode, local_gradients):
    claimed = {FIELD.get(k, k) for k in modes.keys_used(mode, local_gradients)}
    assert claimed <= fields_read(mode, local_gradients), mode


def test_a_key_no_longer_read_is_caught(monkeypatch):
    """Planted: GradDrop's exchange stops reading one_bit (its settings never consulted)."""
    from tf_nmt.distributed.comm import graddrop

    original = graddrop.GradDropExchange.__init__

    def forgetful(self, settings, *args, **kwargs):
        copy = comm_settings.CommSettings(**{f: getattr(settings, f)
                                              for f in settings.__dataclass_fields__
                                              if f != "one_bit"})
        original(self, copy, *args, **kwargs)

    monkeypatch.setattr(graddrop.GradDropExchange, "__init__", forgetful)
    assert "one_bit" not in fields_read("graddrop", False)


FACTS = {"COMM_MODES", "HOROVOD_MODES", "ELASTIC_MODES", "GRADDROP_KEYS", "BMUF_KEYS",
         "AVERAGING_KEYS", "MODE_KEYS", "SCHEDULE_KEYS", "WITHOUT_WARMUP"}


def test_each_registry_fact_is_defined_in_the_registry_only():
    root = Path(modes.__file__).parent
    defined = {}
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            targets = node.targets if isinstance(node, ast.Assign) else (
                [node.target] if isinstance(node, ast.AnnAssign) else [])
            for target in targets:
                if isinstance(target, ast.Name) and target.id in FACTS:
                    value = node.value
                    if not (isinstance(value, ast.Attribute) and ast.unparse(value).startswith("modes.")):
                        defined.setdefault(target.id, []).append(str(path.relative_to(root)))
    assert defined == {name: ["modes.py"] for name in FACTS}
