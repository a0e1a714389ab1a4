"""The quickstart's recipe: the preset, a time budget, the Ding oversampling, user overrides last."""
from tf_nmt.config import preset
from tf_nmt.commands.quickstart import QUICKSTART_OVERSAMPLE, quickstart_config


def test_the_recipe_up_weights_ding_and_budgets_time(tmp_path):
    cfg = quickstart_config(tmp_path / "data", 45.0)
    assert cfg.data.oversample == QUICKSTART_OVERSAMPLE and QUICKSTART_OVERSAMPLE.get("ding", 1) > 1
    assert cfg.data.data_dir == str(tmp_path / "data")
    assert cfg.train.time_budget_minutes == 45.0 and cfg.train.peak_lr == 2e-3
    assert quickstart_config(tmp_path, 45.0, preset_name="gnmt-small").model.kind == "gnmt"


def test_user_overrides_win_and_the_recipe_is_not_mutated(tmp_path):
    off = quickstart_config(tmp_path, 45.0, ["data.oversample={}"])
    assert off.data.oversample == {}
    more = quickstart_config(tmp_path, 45.0, ["data.oversample={ding: 5, gcc: 2}"])
    assert more.data.oversample == {"ding": 5, "gcc": 2}
    more.data.oversample["lo_ui"] = 2
    assert quickstart_config(tmp_path, 45.0).data.oversample == QUICKSTART_OVERSAMPLE


def test_the_transformer_trains_on_half_batches_with_the_warmup_kept_in_tokens(tmp_path):
    cfg, base = quickstart_config(tmp_path, 45.0), preset("quickstart")
    assert cfg.data.batch_tokens * 2 == base.data.batch_tokens == 4096
    assert cfg.train.warmup_steps == 2 * base.train.warmup_steps
    assert cfg.train.steps_per_cycle == 2 * base.train.steps_per_cycle
    assert quickstart_config(tmp_path, 45.0, ["data.batch_tokens=4096"]).data.batch_tokens == 4096
    gnmt = quickstart_config(tmp_path, 45.0, preset_name="gnmt-small")
    assert gnmt.data.batch_tokens == preset("gnmt-small").data.batch_tokens  # not piloted there
