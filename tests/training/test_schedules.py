"""Learning-rate schedules against their closed-form formulas."""
import pytest

from tf_nmt.training.schedules import build_schedule, reference_value

CASES = [
    ("warmup_inverse_sqrt", dict(peak_lr=1e-3, warmup_steps=100)),
    ("inverse_sqrt", dict(peak_lr=5e-4, warmup_steps=50)),
    ("linear_warmup", dict(peak_lr=2e-3, warmup_steps=30)),
    ("step_decay", dict(peak_lr=1.0, decay_start=100, decay_every=25, decay_factor=0.5)),
    ("constant", dict(peak_lr=0.1)),
]


@pytest.mark.parametrize("name,params", CASES)
def test_matches_formula(name, params):
    schedule = build_schedule(name, **params)
    for step in [0, 1, 10, 29, 30, 49, 99, 100, 101, 124, 125, 1000, 123456]:
        assert float(schedule(step)) == pytest.approx(reference_value(name, step, **params), rel=1e-5)


def test_warmup_peaks_at_warmup_steps():
    schedule = build_schedule("warmup_inverse_sqrt", peak_lr=1e-3, warmup_steps=100)
    values = [float(schedule(s)) for s in range(300)]
    assert max(values) == pytest.approx(1e-3, rel=1e-6)
    assert values.index(max(values)) == 99  # step 99 is the 100th update


def test_unknown_names_and_bad_params():
    with pytest.raises(ValueError, match="unknown schedule"):
        build_schedule("cosine", peak_lr=1.0)
    with pytest.raises(ValueError, match="implementation"):
        build_schedule("constant", implementation="cuda", peak_lr=1.0)
    with pytest.raises(ValueError, match="warmup_steps"):
        build_schedule("warmup_inverse_sqrt", peak_lr=1.0, warmup_steps=0)
