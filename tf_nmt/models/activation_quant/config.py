"""The activation-quantisation setting: bits and fixed scale (``train.quantize_activations_*``),
validated, and how layers store it in their configs."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Dict, Mapping, Optional, Union

import numpy as np

from tf_nmt.config import ConfigError

#: The smallest normal float32: scales and magnitudes below it count as zero.
FLOAT32_TINY = float(np.finfo(np.float32).tiny)


@dataclass(frozen=True)
class ActivationQuantization:
    """B-bit log quantisation of matmul inputs with the fixed scale ``scale``.

    Args:
        bits: bits per value, 1..8 (1 sign bit, ``bits - 1`` exponent bits).
        scale: the largest centre S (> 0, finite); centres are ``+-S * 2^-k``.

    Example:
        >>> q = ActivationQuantization(bits=4, scale=1.0)
        >>> fake_quantize(tf.constant([0.3, -2.0]), q).numpy()   # [0.25, -1.0]
    """

    bits: int = 4
    scale: float = 1.0

    def __post_init__(self) -> None:
        if isinstance(self.bits, bool) or not isinstance(self.bits, int) or not 1 <= self.bits <= 8:
            raise ConfigError(f"train.quantize_activations_bits must be 0 (off) or an integer in "
                              f"1..8, got {self.bits!r}")
        if (isinstance(self.scale, bool) or not isinstance(self.scale, (int, float))
                or not math.isfinite(self.scale) or not FLOAT32_TINY <= float(self.scale) < 2.0 ** 126):
            raise ConfigError(f"train.quantize_activations_scale must be a finite float32 scale "
                              f"in [2^-126, 2^126), got {self.scale!r}")
        object.__setattr__(self, "scale", float(np.float32(self.scale)))

    @property
    def inverse_scale(self) -> float:
        """float32 ``1 / S`` (correctly rounded, as the C++ encoder computes it)."""
        return float(np.float32(1.0) / np.float32(self.scale))

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def coerce(cls, value: Union[None, "ActivationQuantization", Mapping[str, Any]]
               ) -> Optional["ActivationQuantization"]:
        """None, an instance, or its ``to_dict()`` (as stored in layer configs)."""
        if value is None or isinstance(value, cls):
            return value
        if isinstance(value, Mapping):
            return cls(**dict(value))
        raise TypeError(f"activation_quantization must be None, a dict or {cls.__name__}, "
                        f"got {type(value).__name__}")


def aq_config(quant: Optional[ActivationQuantization]) -> Optional[Dict[str, Any]]:
    """What a layer's ``get_config`` stores for its setting (None when off)."""
    return quant.to_dict() if quant is not None else None


def from_train_config(t: Any) -> Optional[ActivationQuantization]:
    """The setting a ``TrainConfig`` asks for (``quantize_activations_bits > 0``), else None;
    ConfigError for bad values (also checked when off, so a typo never waits for a later run)."""
    bits, scale = t.quantize_activations_bits, t.quantize_activations_scale
    if bits == 0:
        ActivationQuantization(bits=4, scale=scale)  # validates the scale
        return None
    return ActivationQuantization(bits=bits, scale=scale)
