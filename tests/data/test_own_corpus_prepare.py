"""tf-nmt prepare-data for the user's own files (tf_nmt.data.own_corpus): inputs, held-out splits,
cleaning counts, refusals, resume, shards that decode to the tokenizer's ids, the vocabulary."""
from __future__ import annotations

import gzip
import json
import multiprocessing
import random
import shutil
from pathlib import Path

import pytest

from tf_nmt.cli import main
from tf_nmt.data.own_corpus import encode_worker, shards
from tf_nmt.data.prepared import decode_record, read_prepared

WORDS = [("the", "le"), ("house", "maison"), ("cat", "chat"), ("dog", "chien"), ("runs", "court"),
         ("big", "grand"), ("small", "petit"), ("red", "rouge"), ("blue", "bleu"), ("sees", "voit"),
         ("eats", "mange"), ("old", "vieux"), ("new", "neuf"), ("happy", "heureux")]


def make_pairs(n: int, seed: int = 0, tag: str = ""):
    """``n`` distinct short (en, fr) pairs (a number makes each one unique)."""
    rng = random.Random(seed)
    pairs = []
    for i in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(3, 6))]
        pairs.append((" ".join(w[0] for w in words) + f" {tag}{i}",
                      " ".join(w[1] for w in words) + f" {tag}{i}"))
    return pairs


def write_plain(base: Path, pairs, gz: bool = False):
    opener = gzip.open if gz else open
    suffix = ".gz" if gz else ""
    src, tgt = Path(f"{base}.en{suffix}"), Path(f"{base}.fr{suffix}")
    with opener(src, "wt", encoding="utf-8") as s, opener(tgt, "wt", encoding="utf-8") as t:
        s.writelines(p[0] + "\n" for p in pairs)
        t.writelines(p[1] + "\n" for p in pairs)
    return src, tgt


def write_tsv(path: Path, pairs) -> Path:
    path.write_text("".join(f"{s}\t{t}\n" for s, t in pairs), encoding="utf-8")
    return path


def prepare(data: Path, *flags, workers: int = 1) -> int:
    return main(["prepare-data", "--data-dir", str(data), "--src-lang", "en", "--tgt-lang", "fr",
                 "--vocab-size", "300", "--workers", str(workers), *map(str, flags)])


def error_line(argv_result: int, capsys) -> str:
    assert argv_result == 2
    err = capsys.readouterr().err
    assert err.startswith("tf-nmt: error:") and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    return err


def shard_pairs(data: Path):
    """Every (src ids, tgt ids) of the shards, shard by shard."""
    import tensorflow as tf

    prepared = read_prepared(data)
    return [decode_record(r.numpy()) for path in prepared.shard_paths()
            for r in tf.data.TFRecordDataset(str(path))]


def tokenizer(data: Path):
    from tf_nmt.data.tokenizer import SubwordTokenizer

    manifest = read_prepared(data).manifest
    return SubwordTokenizer.load(data / manifest["vocab"]["path"])


def read_split(data: Path, split: str):
    src, tgt = read_prepared(data).split_files(split)
    return list(zip(src.read_text().splitlines(), tgt.read_text().splitlines()))


@pytest.fixture()
def corpus(tmp_path):
    """320 pairs in a plain pair of files and a .gz pair."""
    pairs = make_pairs(320)
    files = [write_plain(tmp_path / "a", pairs[:200]), write_plain(tmp_path / "b", pairs[200:], gz=True)]
    return pairs, ["--train-src", *(f[0] for f in files), "--train-tgt", *(f[1] for f in files)]


def test_plain_and_gz_files_carved_dev_and_test_shards_decode_to_the_tokenizer_ids(
        tmp_path, corpus, capsys):
    pairs, flags = corpus
    data = tmp_path / "data"
    assert prepare(data, *flags, "--dev-size", "30", "--test-size", "10", workers=2) == 0
    prepared = read_prepared(data)
    manifest = prepared.manifest
    assert prepared.own and prepared.languages == ("en", "fr")
    assert manifest["splits"] == {"train": {"pairs": 280, "origin": "files"},
                                  "dev": {"pairs": 30, "origin": "carved from train"},
                                  "test": {"pairs": 10, "origin": "carved from train"}}
    assert manifest["shards"]["count"] == 8 and sum(s.pairs for s in prepared.shards) == 280
    # the carved lines never reach train (not merely dropped there as overlaps)
    assert manifest["cleaning"]["train"] == {"read": 280, "empty": 0, "too_long": 0, "ratio": 0,
                                             "duplicates": 0, "overlap": 0, "kept": 280}
    assert set(manifest["timings"]["seconds"]) == {"validate", "heldout", "distribute", "vocab",
                                                    "shards"}
    dev, test = read_split(data, "dev"), read_split(data, "test")
    tok = tokenizer(data)
    decoded = shard_pairs(data)
    train = set(zip(tok.decode([s for s, _ in decoded]), tok.decode([t for _, t in decoded])))
    assert train | set(dev) | set(test) == set(pairs)  # each pair in exactly one split
    assert not train & set(dev) and not train & set(test) and not set(dev) & set(test)
    train_list = sorted(train)
    ids = [list(x) for x in decoded]
    by_text = dict(zip(zip(tok.decode([s for s, _ in decoded]), tok.decode([t for _, t in decoded])), ids))
    src_ids = tok.encode([s for s, _ in train_list])
    tgt_ids = tok.encode([t for _, t in train_list])
    assert [by_text[p] for p in train_list] == [[s, t] for s, t in zip(src_ids, tgt_ids)]
    assert "written to" in capsys.readouterr().out


def test_tsv_inputs_given_dev_and_test_files_and_a_cache_hit_rewrites_nothing(tmp_path, capsys):
    pairs = make_pairs(300)
    train = [write_tsv(tmp_path / "t1.tsv", pairs[:150]), write_tsv(tmp_path / "t2.tsv", pairs[150:])]
    dev = write_tsv(tmp_path / "dev.tsv", make_pairs(12, seed=5, tag="d"))
    test_src, test_tgt = write_plain(tmp_path / "test", make_pairs(7, seed=6, tag="t"))
    data = tmp_path / "data"
    flags = ["--train-tsv", *train, "--dev-tsv", dev, "--test-src", test_src, "--test-tgt", test_tgt]
    assert prepare(data, *flags) == 0
    manifest = read_prepared(data).manifest
    assert manifest["splits"]["dev"] == {"pairs": 12, "origin": "files"}
    assert manifest["splits"]["test"] == {"pairs": 7, "origin": "files"}
    assert manifest["splits"]["train"]["pairs"] == 300
    assert read_split(data, "dev") == make_pairs(12, seed=5, tag="d")
    before = {p: p.stat().st_mtime_ns for p in data.rglob("*")}
    capsys.readouterr()
    assert prepare(data, *flags) == 0
    assert "cache hit" in capsys.readouterr().out
    assert {p: p.stat().st_mtime_ns for p in data.rglob("*")} == before


def test_cleaning_counts_are_exact_on_planted_pairs(tmp_path):
    base = make_pairs(300)
    planted = base + [("", ""), ("", "texte seul"), ("text only", "  "),       # empty: 3
                      ("a" * 61, "b b"), ("c c", "d" * 61),                       # too_long: 2
                      ("ok", "une phrase beaucoup trop longue"), ("é", "abcdefg")]  # ratio: 2
    planted += [base[10], base[20], base[20], base[30]]                          # duplicates: 4
    train = write_tsv(tmp_path / "train.tsv", planted)
    dev_pairs = [(base[i][0], f"autre {i}") for i in (1, 2, 3)]                  # overlap: 3
    dev_pairs += make_pairs(4, seed=9, tag="d") + [("lonely", "")]              # dev empty: 1
    dev = write_tsv(tmp_path / "dev.tsv", dev_pairs)
    data = tmp_path / "data"
    assert prepare(data, "--train-tsv", train, "--dev-tsv", dev, "--max-chars", "60",
                   "--max-ratio", "3") == 0
    cleaning = read_prepared(data).manifest["cleaning"]
    assert cleaning["train"] == {"read": 311, "empty": 3, "too_long": 2, "ratio": 2,
                                 "duplicates": 4, "overlap": 3, "kept": 297}
    assert cleaning["dev"] == {"read": 8, "empty": 1, "too_long": 0, "ratio": 0,
                               "duplicates": 0, "overlap": 0, "kept": 7}
    assert read_prepared(data).train_pairs == 297


def _line_counts_differ(tmp):
    write_plain(tmp / "x", make_pairs(50))
    (tmp / "x.fr").write_text("".join(f"{t}\n" for _, t in make_pairs(49)))
    return ["--train-src", tmp / "x.en", "--train-tgt", tmp / "x.fr"], "x.en:50: line counts differ"


def _empty_file(tmp):
    write_plain(tmp / "x", make_pairs(50))
    (tmp / "x.fr").write_text("")
    return ["--train-src", tmp / "x.en", "--train-tgt", tmp / "x.fr"], "x.fr: file is empty"


def _invalid_utf8(tmp):
    write_plain(tmp / "x", make_pairs(50), gz=True)
    lines = [t.encode() for _, t in make_pairs(50)]
    lines[41] = b"caf\xe9"
    (tmp / "x.fr.gz").write_bytes(gzip.compress(b"\n".join(lines) + b"\n"))
    return ["--train-src", tmp / "x.en.gz", "--train-tgt", tmp / "x.fr.gz"], "x.fr.gz:42: invalid UTF-8"


def _tsv_two_tabs(tmp):
    rows = [f"{s}\t{t}" for s, t in make_pairs(50)]
    rows[6] += "\textra"
    (tmp / "x.tsv").write_text("\n".join(rows) + "\n")
    return ["--train-tsv", tmp / "x.tsv"], "x.tsv:7: expected source<TAB>target (exactly one TAB), found 2"


def _tsv_no_tab(tmp):
    rows = [f"{s}\t{t}" for s, t in make_pairs(50)]
    rows[2] = "no tab here"
    (tmp / "x.tsv").write_text("\n".join(rows) + "\n")
    return ["--train-tsv", tmp / "x.tsv"], "x.tsv:3: expected source<TAB>target (exactly one TAB), found 0"


def _bad_dev_file(tmp):  # the dev file is read after all of train: still before any write
    rows = [f"{s}\t{t}" for s, t in make_pairs(50)]
    (tmp / "x.tsv").write_text("\n".join(rows) + "\n")
    (tmp / "dev.tsv").write_bytes(b"good\tbon\n\xff\tbad\n")
    return ["--train-tsv", tmp / "x.tsv", "--dev-tsv", tmp / "dev.tsv"], "dev.tsv:2: invalid UTF-8"


@pytest.mark.parametrize("make", [_line_counts_differ, _empty_file, _invalid_utf8, _tsv_two_tabs,
                                  _tsv_no_tab, _bad_dev_file])
def test_bad_input_is_one_line_naming_file_and_line_and_nothing_is_written(make, tmp_path, capsys):
    flags, message = make(tmp_path)
    data = tmp_path / "data"
    extra = [] if "--dev-tsv" in flags else ["--dev-size", "5"]
    err = error_line(prepare(data, *flags, *extra), capsys)
    assert message in err
    assert not data.exists() and not (tmp_path / "data.partial").exists()


def test_another_corpus_in_data_dir_is_refused_unless_force(tmp_path, corpus, capsys):
    _, flags = corpus
    data = tmp_path / "data"
    (data / "corpus").mkdir(parents=True)
    (data / "corpus" / "stats.json").write_text("{}")
    err = error_line(prepare(data, *flags, "--dev-size", "20"), capsys)
    assert "holds the built-in en-de corpus" in err and "--force" in err
    assert [p.name for p in data.rglob("*")] == ["corpus", "stats.json"]
    assert not (tmp_path / "data.partial").exists()
    assert prepare(data, *flags, "--dev-size", "20", "--force") == 0
    assert read_prepared(data).own and not (data / "corpus" / "stats.json").exists()
    err = error_line(prepare(data, *flags, "--dev-size", "21"), capsys)  # other parameters
    assert "own corpus prepared with other parameters (dev_size)" in err
    assert read_prepared(data).manifest["params"]["dev_size"] == 20


def test_a_killed_prepare_resumes_with_its_finished_shards_and_matches_an_uninterrupted_run(
        tmp_path, corpus, monkeypatch, capsys):
    _, flags = corpus
    flags = [*flags, "--dev-size", "20"]
    assert prepare(tmp_path / "whole", *flags) == 0
    real, written = shards.write_shard, []

    def dies_after_three(path, records):
        if len(written) == 3:
            raise KeyboardInterrupt("killed")
        written.append(path.name)
        return real(path, records)

    monkeypatch.setattr(shards, "write_shard", dies_after_three)
    data = tmp_path / "data"
    assert prepare(data, *flags) == 130  # "tf-nmt: interrupted"
    partial = tmp_path / "data.partial"
    assert not data.exists() and len(json.loads((partial / "state.json").read_text())["shards"]) == 3
    kept = {n: (partial / "out" / "shards" / n).stat().st_mtime_ns for n in written}
    monkeypatch.setattr(shards, "write_shard", real)
    capsys.readouterr()
    assert prepare(data, *flags) == 0
    out = capsys.readouterr().out
    assert "reusing 3 of 8 shards" in out and "distribute: done by an earlier run" in out
    assert {n: (data / "shards" / n).stat().st_mtime_ns for n in written} == kept
    assert not partial.exists()
    files = lambda root: {p.relative_to(root): p.read_bytes() for p in root.rglob("*")  # noqa: E731
                          if p.is_file() and p.name != "manifest.json"}
    assert files(data) == files(tmp_path / "whole")
    strip = lambda m: {k: v for k, v in m.items() if k != "timings"}  # noqa: E731
    assert strip(read_prepared(data).manifest) == strip(read_prepared(tmp_path / "whole").manifest)

    # other parameters: the stale partial build is discarded, not resumed
    monkeypatch.setattr(shards, "write_shard", dies_after_three)
    written.clear()
    assert prepare(tmp_path / "other", *flags) == 130
    monkeypatch.setattr(shards, "write_shard", real)
    capsys.readouterr()
    assert prepare(tmp_path / "other", *flags[:-1], "21") == 0
    assert "discarding" in capsys.readouterr().out


def test_user_spm_model_bpe_vocab_and_a_model_with_other_special_ids(tmp_path, corpus, capsys):
    import io

    import sentencepiece as spm

    pairs, flags = corpus
    bpe = tmp_path / "bpe"
    assert prepare(bpe, *flags, "--dev-size", "20", "--vocab-type", "bpe") == 0
    vocab = read_prepared(bpe).manifest["vocab"]
    assert vocab["type"] == "bpe" and vocab["size"] == 300 and vocab["sample_sentences"] == 600
    model = tmp_path / "my.model"
    model.write_bytes((bpe / vocab["path"]).read_bytes())
    mine = tmp_path / "mine"
    assert main(["prepare-data", "--data-dir", str(mine), "--src-lang", "en", "--tgt-lang", "fr",
                 *map(str, flags), "--dev-size", "20", "--spm-model", str(model),
                 "--workers", "1"]) == 0
    used = read_prepared(mine).manifest["vocab"]
    assert used["fingerprint"] == vocab["fingerprint"] and used["source"].startswith("user model")
    assert shard_pairs(mine) == shard_pairs(bpe)
    proto = io.BytesIO()  # sentencepiece's own default ids: unk 0, bos 1, eos 2, no pad
    spm.SentencePieceTrainer.train(sentence_iterator=iter([p[0] for p in pairs]),
                                   model_writer=proto, vocab_size=60, minloglevel=2)
    (tmp_path / "default.model").write_bytes(proto.getvalue())
    err = error_line(main(["prepare-data", "--data-dir", str(tmp_path / "x"), "--src-lang", "en",
                           "--tgt-lang", "fr", *map(str, flags), "--spm-model",
                           str(tmp_path / "default.model")]), capsys)
    assert "pad/unk/bos/eos ids are -1/0/1/2" in err and "--pad_id=0 --unk_id=1 --bos_id=2 --eos_id=3" in err
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("argv, message", [
    (["--max-chars", "10"], "--max-chars would be ignored: own-corpus flags need --train-src"),
    (["--train-src", "a.en", "--src-lang", "en", "--tgt-lang", "fr"], "--train-src and --train-tgt go together"),
    (["--train-tsv", "a.tsv", "--src-lang", "en", "--tgt-lang", "fr", "--debs-dir", "d"], "--debs-dir would be ignored"),
    (["--train-tsv", "a.tsv", "--src-lang", "en", "--tgt-lang", "fr", "--dev-tsv", "d.tsv",
      "--dev-size", "9"], "--dev-size would be ignored"),
    (["--train-tsv", "a.tsv", "--src-lang", "en", "--tgt-lang", "fr", "--spm-model", "m",
      "--vocab-size", "500"], "--vocab-size would be ignored with --spm-model"),
    (["--train-tsv", "a.tsv", "--src-lang", "en"], "needs --tgt-lang"),
    (["--train-tsv", "a.tsv", "--src-lang", "en", "--tgt-lang", "fr"], "a.tsv: file not found"),
])
def test_flags_that_do_not_fit_are_one_usage_line(argv, message, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    err = error_line(main(["prepare-data", "--data-dir", str(tmp_path / "d"), *argv]), capsys)
    assert message in err and not (tmp_path / "d").exists()


def test_encoding_workers_do_not_import_tensorflow():
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        assert pool.apply(encode_worker.heavy_modules) == []


def test_ratio_counts_characters_not_utf8_bytes():
    """Cyrillic takes 2 bytes a letter: by bytes this good pair would be 4.1x, by characters 2.25x."""
    from tf_nmt.data.own_corpus.clean import Filters

    assert Filters(max_ratio=3.0).reject("Save doc", "Сохранить документ") is None
    assert Filters(max_ratio=3.0).reject("OK", "Сохранить") == "ratio"


def test_separate_vocab_learns_a_model_per_side_and_encodes_each_side_with_its_own(
        tmp_path, corpus, capsys):
    import sentencepiece as spm

    from tf_nmt.data.tokenizer import SubwordTokenizer

    pairs, flags = corpus
    data = tmp_path / "data"
    assert prepare(data, *flags, "--dev-size", "20", "--separate-vocab",
                   "--tgt-vocab-size", "320") == 0
    prepared = read_prepared(data)
    vocab = prepared.manifest["vocab"]
    assert vocab["shared"] is False and not prepared.shared_vocab
    assert (vocab["src"]["path"], vocab["tgt"]["path"]) == ("vocab/spm-src-300.model",
                                                            "vocab/spm-tgt-320.model")
    assert (prepared.source_vocab_size, prepared.vocab_size) == (300, 320)
    assert prepared.source_vocab_fingerprint == vocab["src"]["fingerprint"]
    assert prepared.vocab_fingerprint == vocab["tgt"]["fingerprint"] == vocab["fingerprint"]
    src_tok = SubwordTokenizer.load(data / vocab["src"]["path"])
    tgt_tok = SubwordTokenizer.load(data / vocab["tgt"]["path"])
    # each model learned from its own side of the sample only: letters of one language only
    # (w: new, happy; x: vieux, heureux) are pieces of that side's model alone
    pieces = {side: set(spm.SentencePieceProcessor(model_file=str(data / vocab[side]["path"]))
                        .id_to_piece(i) for i in range(tok.vocab_size))
              for side, tok in (("src", src_tok), ("tgt", tgt_tok))}
    assert "w" in pieces["src"] and "w" not in pieces["tgt"]
    assert "x" in pieces["tgt"] and "x" not in pieces["src"]
    # shard records: sources in the source model's ids, targets in the target model's
    decoded = shard_pairs(data)
    texts = list(zip(src_tok.decode([s for s, _ in decoded]),
                     tgt_tok.decode([t for _, t in decoded])))
    assert set(texts) | set(read_split(data, "dev")) == set(pairs)
    assert [list(x) for x in decoded] == [
        [s, t] for s, t in zip(src_tok.encode([s for s, _ in texts]),
                               tgt_tok.encode([t for _, t in texts]))]
    assert "vocabularies: source 300" in capsys.readouterr().out
    # the vocabulary mode is part of what the data dir holds: the shared corpus is another one
    err = error_line(prepare(data, *flags, "--dev-size", "20"), capsys)
    assert "other parameters (vocab)" in err and "--force" in err
    # a missing source model is a damaged corpus: prepared again, not a cache hit
    (data / vocab["src"]["path"]).unlink()
    assert prepare(data, *flags, "--dev-size", "20", "--separate-vocab",
                   "--tgt-vocab-size", "320") == 0
    assert "but damaged" in capsys.readouterr().out and (data / vocab["src"]["path"]).is_file()


@pytest.mark.parametrize("argv, message", [
    (["--src-vocab-size", "400"], "--src-vocab-size would be ignored without --separate-vocab"),
    (["--src-spm-model", "m"], "--src-spm-model and --tgt-spm-model go together"),
    (["--spm-model", "m", "--separate-vocab"], "--spm-model is one vocabulary shared by both"),
    (["--spm-model", "m", "--src-spm-model", "m", "--tgt-spm-model", "n"],
     "--spm-model is one vocabulary shared by both"),
    (["--src-spm-model", "m", "--tgt-spm-model", "n", "--tgt-vocab-size", "400"],
     "--tgt-vocab-size would be ignored with --src-spm-model/--tgt-spm-model"),
    (["--separate-vocab", "--vocab-size", "500", "--src-vocab-size", "400",
      "--tgt-vocab-size", "400"], "--vocab-size would be ignored: --src-vocab-size and"),
    (["--separate-vocab", "--src-vocab-size", "200"], "--src-vocab-size 200: at least 300"),
])
def test_separate_vocab_flags_that_do_not_fit_are_one_usage_line(argv, message, tmp_path, capsys,
                                                                 monkeypatch):
    monkeypatch.chdir(tmp_path)
    err = error_line(main(["prepare-data", "--data-dir", str(tmp_path / "d"), "--train-tsv",
                           "a.tsv", "--src-lang", "en", "--tgt-lang", "fr", *argv]), capsys)
    assert message in err and not (tmp_path / "d").exists()


def test_separate_vocab_flags_are_refused_for_the_builtin_corpus(tmp_path, capsys):
    err = error_line(main(["prepare-data", "--data-dir", str(tmp_path / "d"), "--separate-vocab"]),
                     capsys)
    assert "--separate-vocab would be ignored: own-corpus flags need" in err


def test_shards_and_buckets_are_fsynced_before_the_state_claims_them(tmp_path, corpus, monkeypatch):
    """A power loss must not leave a state.json that claims a shard or the buckets whose bytes
    were still in the page cache: each is fsynced (and its directory) before the save."""
    import os

    from tf_nmt.data.own_corpus import staging

    _, flags = corpus
    events, real_fsync, real_save = [], os.fsync, staging.Staging.save

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        return real_fsync(fd)

    def save(self):
        names = {info["name"] for info in self.state["shards"].values()}
        events.append(("save", "distribute" in self.state, names))
        return real_save(self)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(staging.Staging, "save", save)
    assert prepare(tmp_path / "data", *flags, "--dev-size", "20") == 0
    synced = set()
    first_distribute = True
    for event in events:
        if event[0] == "fsync":
            synced.add(Path(event[1]))
            continue
        _, distributed, shard_names = event
        buckets = tmp_path / "data.partial" / "work" / "buckets"
        if distributed and first_distribute:
            first_distribute = False
            assert {buckets / f"bucket-{i:05d}.tsv" for i in range(8)} | {buckets} <= synced
        shard_dir = tmp_path / "data.partial" / "out" / "shards"
        for name in shard_names:
            assert shard_dir / f".{name}.tmp" in synced, f"{name} claimed before its fsync"
        if shard_names:
            assert shard_dir in synced
    assert not first_distribute


def test_a_leftover_partial_of_a_finished_build_is_removed_on_the_next_run(
        tmp_path, corpus, monkeypatch, capsys):
    from tf_nmt.data.own_corpus import staging

    _, flags = corpus
    flags = [*flags, "--dev-size", "20"]
    data, partial = tmp_path / "data", tmp_path / "data.partial"
    real = staging.Staging.discard

    def killed(self):
        raise KeyboardInterrupt("killed between the replace and the clean-up")

    monkeypatch.setattr(staging.Staging, "discard", killed)
    assert prepare(data, *flags) == 130
    monkeypatch.setattr(staging.Staging, "discard", real)
    assert read_prepared(data).own and (partial / "work" / "buckets").is_dir()  # the leftover
    capsys.readouterr()
    assert prepare(data, *flags) == 0  # a cache hit, and the leftover goes
    out = capsys.readouterr().out
    assert "cache hit" in out and f"removed {partial}: the leftover" in out
    assert not partial.exists()

    # the same kill, then the user deletes DATA_DIR: the partial's output was moved, so it is not
    # resumed (it has no vocabulary or held-out files left) but removed, and the corpus rebuilt
    other, other_partial = tmp_path / "other", tmp_path / "other.partial"
    monkeypatch.setattr(staging.Staging, "discard", killed)
    assert prepare(other, *flags) == 130
    monkeypatch.setattr(staging.Staging, "discard", real)
    shutil.rmtree(other)
    capsys.readouterr()
    assert prepare(other, *flags) == 0
    assert f"removed {other_partial}: the leftover of a finished build" in capsys.readouterr().out
    assert read_prepared(other).own and not other_partial.exists()

    # a partial build of other parameters is kept on a cache hit, and said
    monkeypatch.setattr(shards, "write_shard", lambda path, records: (_ for _ in ()).throw(
        KeyboardInterrupt("killed")))
    assert prepare(data, *flags[:-1], "21", "--force") == 130
    monkeypatch.undo()
    capsys.readouterr()
    assert prepare(data, *flags) == 0
    assert f"note: {partial} holds a partial build of other inputs" in capsys.readouterr().out
    assert partial.exists()
