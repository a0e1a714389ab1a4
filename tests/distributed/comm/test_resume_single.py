"""Exact resume in one process for a mode whose final sync changes the model (BMUF): the run
stopped at step 5 and resumed ends bit-identical to the run trained straight to 8, and the
chief's last checkpoint holds the synchronised model while checkpoints/rank-0 holds the state
training continues from."""
import numpy as np
import pytest

from tests.helpers import write_toy_data_dir
from tests.parallel.workers.resume import STEPS, STOP, run_mode, tensors
from tf_nmt.data.data_dir import ensure_vocab
from tf_nmt.distributed import SINGLE

pytestmark = [pytest.mark.keras2, pytest.mark.slow]


def test_single_process_bmuf_resumes_bit_identical(tmp_path):
    data = write_toy_data_dir(tmp_path / "data")
    ensure_vocab(data, 320, log=lambda _m: None)
    got = run_mode(SINGLE, tmp_path, data, "bmuf")
    assert (got["first_final"], got["resumed_from"], got["final"]) == (STOP, STOP, STEPS)
    assert got["rank_dirs"] == ["rank-0"]
    for key in ("rank_state", "chief"):
        assert got[key]["only_one_side"] == [] and got[key]["max_abs_diff"] == 0.0, got[key]["worst"]
    checkpoints = tmp_path / "bmuf-straight" / "checkpoints"
    own, chief = tensors(str(checkpoints / "rank-0" / f"ckpt-{STEPS}")), tensors(str(checkpoints / f"ckpt-{STEPS}"))
    model = [n for n in chief if n.startswith("model/")]
    # step 8 is no multiple of average_every (3): the final block update moved the chief's model
    assert max(np.abs(chief[n] - own[n]).max() for n in model) > 1e-6
    assert any(n.startswith("comm/global_params") for n in own)
