"""Which of a model's variables are quantised, and how.

Matrices and embeddings (rank >= 2) are always quantised; vectors (biases, layer-norm gain and
offset, attention vectors) stay float32 unless ``quantize_biases``; scalars never are. Each
quantised tensor gets its own scale.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Dict

from tf_nmt.config import ConfigError
from tf_nmt.quantization.codec import check_kind

SCALE_MODES = ("unscaled", "max", "optimised")


@dataclass(frozen=True)
class QuantPolicy:
    bits: int = 4
    kind: str = "log"          # "log" or "fixed" (the uniform baseline)
    scale: str = "optimised"   # "unscaled" | "max" | "optimised"
    quantize_biases: bool = False
    iterations: int = 10       # scale-fit iterations for "optimised"

    def __post_init__(self) -> None:
        if not isinstance(self.bits, int) or not 1 <= self.bits <= 8:
            raise ConfigError(f"quantisation bits must be an integer in 1..8, got {self.bits!r}")
        check_kind(self.kind)
        if self.scale not in SCALE_MODES:
            raise ConfigError(f"quantisation scale must be one of {SCALE_MODES}, got {self.scale!r}")

    def quantizes(self, shape) -> bool:
        """True for a tensor of this shape under this policy."""
        rank = len(shape)
        return rank >= 2 or (rank == 1 and self.quantize_biases)

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: Dict[str, Any]) -> "QuantPolicy":
        return cls(**raw)
