"""build_model: defaults, validation of kinds and hyper-parameter names."""
import pytest

from tf_nmt.models import GNMT, MODEL_DEFAULTS, Transformer, build_model


def test_defaults_build_each_kind():
    assert isinstance(build_model("transformer", 50), Transformer)
    gnmt = build_model("gnmt", 50, units=8, num_layers=2)
    assert isinstance(gnmt, GNMT) and gnmt.vocab_size == 50
    assert gnmt.get_config() == {**MODEL_DEFAULTS["gnmt"], "vocab_size": 50, "units": 8, "num_layers": 2,
                                 "source_vocab_size": None, "activation_quantization": None}
    assert GNMT.from_config(gnmt.get_config()).get_config() == gnmt.get_config()


def test_unknown_hparam_lists_valid_ones():
    with pytest.raises(ValueError, match=r"unknown transformer hyper-parameter.*\['bogus'\].*d_model"):
        build_model("transformer", 50, bogus=1)


def test_unknown_kind():
    with pytest.raises(ValueError, match="gnmt"):
        build_model("rnn", 50)


@pytest.mark.parametrize("kind,bad", [("transformer", {"norm": "middle"}),
                                      ("transformer", {"d_model": 30, "num_heads": 4}),
                                      ("gnmt", {"attention": "dot"})])
def test_invalid_values(kind, bad):
    with pytest.raises(ValueError):
        build_model(kind, 50, **bad)
