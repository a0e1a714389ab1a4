"""The vector widths a kernel test may run here: a test parametrised over
:data:`tf_nmt.ops.isa.ISAS` calls :func:`require` first, so the widths this CPU lacks are skipped
(with the reason) instead of silently running a narrower loop."""
import pytest

from tf_nmt.ops import isa as simd

RUNNABLE = simd.runnable()  # narrowest first


def require(isa: str) -> None:
    """Skip the calling test when this CPU cannot run the ``isa`` loops."""
    if isa not in RUNNABLE:
        pytest.skip(f"this CPU has no {isa} (it runs {', '.join(RUNNABLE)})")
