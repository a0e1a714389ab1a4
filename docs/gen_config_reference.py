#!/usr/bin/env python
"""Write docs/configuration-reference.md from the configuration dataclasses.

Run from a checkout (no TensorFlow is imported):

    python docs/gen_config_reference.py           # rewrite docs/configuration-reference.md
    python docs/gen_config_reference.py --check   # exit 1 when the page is stale

Every key's type, default, valid values and description come from ``tf_nmt/config.py``
(each field's ``metadata["help"]``, ``["range"]`` or ``["choices"]``); the presets from ``tf_nmt.config.PRESETS``; the model hyper-parameters'
defaults from ``TRANSFORMER_DEFAULTS`` and ``GNMT_DEFAULTS``, read from their modules' source
(importing the models would import TensorFlow) and described by :data:`HPARAM_HELP` below.
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "configuration-reference.md"
COMMAND = "python docs/gen_config_reference.py"

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tf_nmt import config  # noqa: E402  (after the checkout is on sys.path)

SECTIONS = (
    ("data", config.DataConfig, "the prepared data and how it is batched"),
    ("model", config.ModelConfig, "which model; its hyper-parameters are `model.NAME` keys "
                                  "(see [Model hyper-parameters](#model-hyper-parameters))"),
    ("train", config.TrainConfig, "optimisation, checkpoints, kernels, gradient communication, "
                                  "quantisation and transfer learning"),
    ("decode", config.DecodeConfig, "beam search in `evaluate`, `translate` and `export`"),
)

# (model kind, module defining its defaults, name of the defaults dict)
MODEL_DEFAULTS = (("transformer", "tf_nmt/models/transformer.py", "TRANSFORMER_DEFAULTS"),
                  ("gnmt", "tf_nmt/models/gnmt.py", "GNMT_DEFAULTS"))

#: One line per model hyper-parameter. A hyper-parameter a model gains without a line here
#: makes the generator fail, so the reference cannot silently fall behind the models.
HPARAM_HELP: Dict[str, str] = {
    "num_layers": "encoder and decoder layers (each side, unless set below)",
    "num_encoder_layers": "encoder layers (null: `num_layers`)",
    "num_decoder_layers": "decoder layers (null: `num_layers`)",
    "d_model": "Transformer: model (embedding) width",
    "num_heads": "Transformer: attention heads",
    "ff_dim": "Transformer: inner width of the feed-forward blocks",
    "dropout": "dropout rate",
    "attention_dropout": "Transformer: dropout on the attention weights",
    "norm": "Transformer: `pre` or `post` layer normalisation",
    "output_bias": "a bias on the output projection",
    "tie_embeddings": "Transformer: the output projection reuses the shared embedding matrix",
    "units": "GNMT: LSTM units per layer",
    "embedding_dim": "GNMT: embedding width (null: `units`)",
    "attention": "GNMT: `luong` or `bahdanau` attention",
}


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell (for code spans: pipes escaped)."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _prose(text: str) -> str:
    """A description safe inside a table cell: also ``<``/``>`` outside code spans, which would
    read as HTML."""
    parts = _cell(text).split("`")
    for i in range(0, len(parts), 2):  # the even parts are outside code spans
        parts[i] = parts[i].replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts)


def _value(value: Any) -> str:
    """A value as it would be written after ``--set section.key=`` (YAML flow style)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        return value if value else '""'
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_value(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _type(annotation: Any) -> str:
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    return {"Dict[str, int]": "mapping of str to int", "Dict[str, Any]": "mapping",
            "Union[bool, str]": "bool or auto"}.get(text, text)


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    return f.default_factory()  # type: ignore[misc]


def field_help(section_type: type) -> Dict[str, str]:
    """``{field name: help}`` of a section dataclass ("" where a field has none)."""
    return {f.name: f.metadata.get("help", "") for f in dataclasses.fields(section_type)}


def _valid(valid: Any, default: Any) -> str:
    """What a key accepts: its :class:`~tf_nmt.config.Range` (of each value, for a mapping) or
    :class:`~tf_nmt.config.Choices`; a boolean's two values; "–" for free text."""
    if isinstance(valid, config.Choices):
        return ", ".join(f"`{_value(v)}`" for v in valid.values)
    if isinstance(valid, config.Range):
        return f"{'each value ' if isinstance(default, dict) else ''}`{_cell(valid)}`"
    return "`true`, `false`" if isinstance(default, bool) else "–"


def _section_table(name: str, section_type: type) -> List[str]:
    lines = ["| key | type | default | valid | description |", "|---|---|---|---|---|"]
    for f in dataclasses.fields(section_type):
        text = f.metadata.get("help", "")
        if not text:
            raise SystemExit(f"tf_nmt/config.py: {section_type.__name__}.{f.name} has no "
                             "metadata={'help': ...}")
        lines.append(f"| `{name}.{f.name}` | {_prose(_type(f.type))} | `{_cell(_value(_default(f)))}` "
                     f"| {_valid(config.valid_values(f), _default(f))} | {_prose(text)} |")
    return lines


def model_defaults() -> Dict[str, Dict[str, Any]]:
    """``{kind: {hparam: default}}``, read from the models' source without importing them."""
    out = {}
    for kind, path, name in MODEL_DEFAULTS:
        tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            targets = ([node.target] if isinstance(node, ast.AnnAssign) else
                       node.targets if isinstance(node, ast.Assign) else [])
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                out[kind] = ast.literal_eval(node.value)
                break
        else:
            raise SystemExit(f"{path}: no {name} found")
    return out


def _hparam_table() -> List[str]:
    defaults = model_defaults()
    kinds = [kind for kind, _, _ in MODEL_DEFAULTS]
    names: List[str] = []
    for kind in kinds:
        names += [n for n in defaults[kind] if n not in names]
    missing = [n for n in names if n not in HPARAM_HELP]
    if missing:
        raise SystemExit(f"docs/gen_config_reference.py: HPARAM_HELP has no line for {missing}")
    lines = ["| key | " + " | ".join(f"`{k}` default" for k in kinds) + " | valid | description |",
             "|---" * (len(kinds) + 3) + "|"]
    for n in names:
        cells = [f"`{_cell(_value(defaults[k][n]))}`" if n in defaults[k] else "–" for k in kinds]
        default = next(defaults[k][n] for k in kinds if n in defaults[k])
        valid = _valid(config.MODEL_HPARAMS.get(n), default)
        lines.append(f"| `model.{n}` | " + " | ".join(cells) + f" | {valid} | "
                     f"{_prose(HPARAM_HELP[n])} |")
    return lines


def _preset_table(values: Dict[str, Dict[str, Any]]) -> List[str]:
    lines = ["| key | value |", "|---|---|"]
    for section, keys in values.items():
        for key, value in keys.items():
            lines.append(f"| `{section}.{key}` | `{_cell(_value(value))}` |")
    return lines


def render() -> str:
    """The whole page."""
    out = [
        "<!-- GENERATED by docs/gen_config_reference.py from tf_nmt/config.py: do not edit. -->",
        f"<!-- Regenerate with: {COMMAND} -->",
        "",
        "# Configuration reference",
        "",
        "Every key a run's configuration has, with its type, default, valid values and meaning. "
        "A value outside the valid ones is refused in one line naming the key, the value and "
        "what is valid, whether it comes from `--set`, a config file or a preset (a range "
        "`[lo, hi)` includes `lo`, not `hi`; `0 (off) or ...` also takes 0, which turns the "
        "feature off). How to set them (config files, `--set`, presets) is in "
        "[configuration.md](configuration.md).",
        "",
    ]
    for name, section_type, what in SECTIONS:
        out += [f"## `{name}`", "", f"`{name}.*`: {what}.", ""]
        out += _section_table(name, section_type) + [""]
    out += ["## Model hyper-parameters", "",
            "Set as `model.NAME` (e.g. `--set model.num_layers=6`). A name the chosen "
            "`model.kind` does not have is refused; unset ones take the defaults below.", ""]
    out += _hparam_table() + [""]
    out += ["## Presets", "",
            "`--preset NAME` starts from the defaults above with these keys changed; a config "
            "file and `--set` apply on top.", ""]
    for preset_name, values in config.PRESETS.items():
        out += [f"### `{preset_name}`", ""] + _preset_table(values) + [""]
    if config.RETIRED_KEYS:
        out += ["## Retired keys", "",
                "Setting one of these is an error that names its replacement. Saved configs of "
                "older runs that hold the value shown still load (the key is dropped).", "",
                "| key | value older runs saved | use instead |", "|---|---|---|"]
        for (section, key), (saved, replacement) in config.RETIRED_KEYS.items():
            out.append(f"| `{section}.{key}` | `{_cell(_value(saved))}` | {_prose(replacement)} |")
        out.append("")
    return "\n".join(out)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when the page differs from what would be generated")
    parser.add_argument("--output", type=Path, default=PAGE, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.is_file() else None
        if current != text:
            print(f"{args.output} is stale: run `{COMMAND}`", file=sys.stderr)
            return 1
        print(f"{args.output} is up to date")
        return 0
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
