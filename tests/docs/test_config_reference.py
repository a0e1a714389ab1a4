"""docs/configuration-reference.md is generated from tf_nmt/config.py and must stay in step.

Both tests read the configuration dataclasses only (no TensorFlow).
"""
import dataclasses
import importlib.util
import sys
from pathlib import Path

import pytest

from tf_nmt import config

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "docs" / "gen_config_reference.py"
SECTIONS = (config.DataConfig, config.ModelConfig, config.TrainConfig, config.DecodeConfig)


def _generator():
    spec = importlib.util.spec_from_file_location("gen_config_reference", GENERATOR)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("section", SECTIONS, ids=lambda s: s.__name__)
def test_every_field_has_a_one_line_help(section):
    bad = [f"{section.__name__}.{f.name}" for f in dataclasses.fields(section)
           if not str(f.metadata.get("help", "")).strip() or "\n" in f.metadata["help"]]
    assert not bad, ("config fields without a one-line field(..., metadata={'help': ...}) in "
                     f"tf_nmt/config.py: {', '.join(bad)}")


def test_committed_reference_is_generated():
    page = ROOT / "docs" / "configuration-reference.md"
    expected = _generator().render()
    current = page.read_text(encoding="utf-8") if page.is_file() else ""
    assert current == expected, (f"{page.relative_to(ROOT)} is stale: run "
                                 "`python docs/gen_config_reference.py` and commit the result")


def test_check_flag_reports_a_stale_page(tmp_path, capsys):
    gen = _generator()
    page = tmp_path / "reference.md"
    assert gen.main(["--output", str(page)]) == 0
    assert gen.main(["--check", "--output", str(page)]) == 0
    page.write_text(page.read_text(encoding="utf-8") + "edited\n", encoding="utf-8")
    assert gen.main(["--check", "--output", str(page)]) == 1
    assert "python docs/gen_config_reference.py" in capsys.readouterr().err
