"""The OpenNMT-tf peer of :mod:`.train_speed`: the same model, data, vocabulary and batch in
OpenNMT-tf 2.32, run from its own virtualenv (``experiments/train_speed/install_opennmt.sh``).

Matching (see ``../shared/STACK.md``): the preset's Transformer (the quickstart's: 3+3 layers,
pre-norm, d_model 256, 4 heads, ffn 1024; transformer-base's: 6+6, post-norm, 512, 8, 2048),
dropout on the residuals only, all embeddings shared with the output layer (with its bias or
without, as ours: ``output_layer_bias``; pre- or post-norm: ``pre_norm``); the corpus pre-split into our SentencePiece pieces (so both see the same tokens), its
vocabulary from ``onmt-build-vocab --from_format sentencepiece``; ``</s>`` appended to the source
as ours does; Adam (0.9, 0.98, 1e-9), label smoothing 0.1, ``InvSqrtDecay`` with our peak and
warm-up; 4,096-token batches. Its dev evaluation is off (it would run a beam search).
The study's ``--set`` overrides reach the peer too (depths, widths, dropout, LR, warm-up, Adam);
one it cannot mirror (untied embeddings, another schedule, clipping) is refused.
"""
from __future__ import annotations

import os
import re
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any, Dict, List, Mapping, Sequence, Tuple

from tf_nmt.config import Config
from experiments.lib import common

MODEL_FILE = '''"""tf-nmt's quickstart Transformer in OpenNMT-tf (written by experiments.train_speed.onmt_peer)."""
import os

import opennmt
import tensorflow as tf

if os.environ.get("ONMT_PEER_BF16") == "1":  # OpenNMT-tf's own switch is float16, GPU only
    tf.keras.mixed_precision.set_global_policy("mixed_bfloat16")


def model():
    return opennmt.models.Transformer(
        num_layers=({encoder_layers}, {decoder_layers}), num_units={d_model}, num_heads={num_heads},
        ffn_inner_dim={ff_dim}, dropout={dropout}, attention_dropout={attention_dropout},
        ffn_dropout=0.0,
        share_embeddings=opennmt.models.EmbeddingsSharingLevel.ALL, pre_norm={pre_norm},
        output_layer_bias={output_bias})
'''

CONFIG = """data:
  train_features_file: {dir}/train.en.sp
  train_labels_file: {dir}/train.de.sp
  source_vocabulary: {dir}/vocab.txt
  target_vocabulary: {dir}/vocab.txt
  source_sequence_controls:
    end: true
params:
  optimizer: Adam
  optimizer_params:
    beta_1: {beta_1}
    beta_2: {beta_2}
    epsilon: {epsilon}
  learning_rate: {peak_lr}
  decay_type: InvSqrtDecay
  decay_params:
    warmup_steps: {warmup}
  label_smoothing: {label_smoothing}
train:
  batch_type: tokens
  maximum_features_length: {max_length}
  maximum_labels_length: {max_length}
  keep_checkpoint_max: 1
"""

STEP_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+): .*Step = (\d+) ; steps/s = [\d.]+, "
                       r"tokens/s = \d+ \((\d+) source, (\d+) target\)", re.MULTILINE)


def mismatches(cfg: Config) -> List[str]:
    """What of ``cfg`` the peer's model file and config cannot mirror (empty: it matches)."""
    if cfg.model.kind != "transformer":
        return [f"model.kind={cfg.model.kind} (the peer is a Transformer)"]
    from tf_nmt.models import resolved_hparams

    h, t, found = resolved_hparams("transformer", cfg.model.hparams), cfg.train, []
    fixed = {"tie_embeddings": True}
    found += [f"model.{k}={h[k]!r} (the peer's is {v!r})" for k, v in fixed.items() if h[k] != v]
    if t.optimizer != "adam":
        found.append(f"train.optimizer={t.optimizer} (the peer's is adam)")
    if t.schedule != "warmup_inverse_sqrt":
        found.append(f"train.schedule={t.schedule} (the peer's is warmup_inverse_sqrt)")
    if t.cooldown_fraction:
        found.append(f"train.cooldown_fraction={t.cooldown_fraction} (the peer has none)")
    if t.clip_norm > 0:
        found.append(f"train.clip_norm={t.clip_norm} (the peer does not clip)")
    return found


def prepare(data_dir: Path, preset_name: str, out: Path, venv: Path,
            overrides: Sequence[str] = ()) -> Path:
    """Write the peer's corpus (our pieces), vocabulary, model file and config under ``out``,
    from ``preset_name`` with the study's ``--set`` ``overrides``; a setting the peer cannot
    mirror (:func:`mismatches`) is refused, so the comparison is never between two models."""
    import sentencepiece as spm

    from tf_nmt.data.data_dir import load_split, vocab_path

    cfg = common.study_config(preset_name, [f"data.data_dir={data_dir}", *overrides], 4096)
    found = mismatches(cfg)
    if found:
        raise ValueError("the OpenNMT-tf peer cannot mirror " + "; ".join(found))
    out.mkdir(parents=True, exist_ok=True)
    sp = spm.SentencePieceProcessor(model_file=str(vocab_path(data_dir, cfg.data.vocab_size)))
    pairs = load_split(data_dir, "train")
    for index, lang in ((0, "en"), (1, "de")):
        pieces = sp.encode([p[index] for p in pairs], out_type=str)
        (out / f"train.{lang}.sp").write_text("".join(" ".join(p) + "\n" for p in pieces))
    special = {sp.pad_id(), sp.bos_id(), sp.eos_id()}
    (out / "spm.vocab").write_text("".join(f"{sp.id_to_piece(i)}\t{sp.get_score(i)}\n"
                                           for i in range(sp.get_piece_size()) if i not in special))
    subprocess.run([str(venv / "bin" / "onmt-build-vocab"), "--from_vocab", str(out / "spm.vocab"),
                    "--from_format", "sentencepiece", "--save_vocab", str(out / "vocab.txt")],
                   check=True, stdout=subprocess.DEVNULL)
    (out / "model.py").write_text(model_file(cfg))
    t = cfg.train
    floats = {name: yaml_float(value) for name, value in
              (("peak_lr", t.peak_lr), ("label_smoothing", t.label_smoothing),
               ("beta_1", t.beta_1), ("beta_2", t.beta_2), ("epsilon", t.epsilon))}
    (out / "config.yml").write_text(CONFIG.format(dir=out, warmup=t.warmup_steps,
                                                  max_length=cfg.data.max_length, **floats))
    return out


def yaml_float(value: float) -> str:
    """``value`` as a YAML 1.1 float: PyYAML (which OpenNMT-tf reads its config with) takes
    ``1e-09`` for a string; its own representer writes ``1.0e-09``."""
    import yaml

    return yaml.safe_dump(float(value)).splitlines()[0]  # the scalar, without "..." after it


def model_file(cfg: Config) -> str:
    """The peer's model file for ``cfg``'s Transformer (encoder and decoder depths apart)."""
    from tf_nmt.models import resolved_hparams

    h = resolved_hparams("transformer", cfg.model.hparams)
    return MODEL_FILE.format(encoder_layers=h["num_encoder_layers"] or h["num_layers"],
                             decoder_layers=h["num_decoder_layers"] or h["num_layers"],
                             d_model=h["d_model"], num_heads=h["num_heads"], ff_dim=h["ff_dim"],
                             dropout=h["dropout"], attention_dropout=h["attention_dropout"],
                             pre_norm=h["norm"] == "pre", output_bias=bool(h["output_bias"]))


def train_command(prepared: Path, model_dir: Path, venv: Path, bf16: bool, steps: int,
                  batch_tokens: int, report_every: int) -> Tuple[List[str], Dict[str, str]]:
    """``onmt-main train`` of ``steps`` steps into ``model_dir``, and its environment."""
    run_cfg = model_dir.with_suffix(".yml")
    model_dir.parent.mkdir(parents=True, exist_ok=True)
    run_cfg.write_text(f"model_dir: {model_dir}\ntrain:\n  batch_size: {batch_tokens}\n"
                       f"  max_step: {steps}\n  save_checkpoints_steps: {steps}\n"
                       f"  save_summary_steps: {report_every}\n")
    cmd = [str(venv / "bin" / "onmt-main"), "--model", str(prepared / "model.py"), "--config",
           str(prepared / "config.yml"), str(run_cfg), "train"]
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    env.update({"ONMT_PEER_BF16": "1" if bf16 else "0", "TF_CPP_MIN_LOG_LEVEL": "1"})
    return cmd, env


def read_log(text: str) -> List[Dict[str, Any]]:
    """OpenNMT-tf's step lines as progress entries: step, s_per_step (from the lines' timestamps:
    its steps/s is printed with two digits), tokens_per_s (target tokens, as ours)."""
    lines = [(datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f"), int(step), float(tgt))
             for stamp, step, _src, tgt in STEP_LINE.findall(text)]
    entries = [{"step": step, "tokens_per_s": tgt,
                "s_per_step": (stamp - prev[0]).total_seconds() / (step - prev[1])}
               for prev, (stamp, step, tgt) in zip(lines, lines[1:])]
    if not entries:
        raise ValueError("fewer than two 'Step = N ; steps/s = ...' lines in the OpenNMT-tf log")
    return entries


def parameter_count(text: str) -> Mapping[str, int]:
    """The parameter count OpenNMT-tf logs, when it does."""
    found = re.search(r"Number of model parameters: (\d+)", text)
    return {"parameters": int(found.group(1))} if found else {}
