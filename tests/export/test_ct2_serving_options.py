"""CTranslate2 serving options without a trained model: the backend switches (set before
ctranslate2 is imported, where each came from, refused once fixed), the thread layout, and the
vocabulary map's lexical shortlist."""
import json
import os
import platform
import subprocess
import sys

import pytest

from tf_nmt.inference import ct2_backend
from tf_nmt.export.ct2_vmap import build_vmap
from tf_nmt.inference.ctranslate2 import thread_layout
from tf_nmt.utils.machine import usable_cores

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_backend_precedence_given_environment_vendor_default(monkeypatch):
    monkeypatch.setitem(ct2_backend.VENDOR_DEFAULTS, "TestVendor",
                        {"CT2_USE_MKL": "1", "CT2_FORCE_CPU_ISA": "AVX2"})
    avx2 = ("avx", "avx2", "fma")
    got = ct2_backend.resolve(environ={}, vendor="TestVendor", flags=avx2)
    assert (got["CT2_USE_MKL"], got["CT2_USE_MKL_source"]) == ("1", "default for TestVendor")
    assert got["CT2_FORCE_CPU_ISA"] == "AVX2"
    got = ct2_backend.resolve(environ={}, vendor="TestVendor", flags=("avx",))
    assert (got["CT2_FORCE_CPU_ISA"], got["CT2_FORCE_CPU_ISA_source"]) == (None, "ctranslate2")
    got = ct2_backend.resolve(environ={"CT2_FORCE_CPU_ISA": "AVX"}, vendor="TestVendor")
    assert (got["CT2_FORCE_CPU_ISA"], got["CT2_FORCE_CPU_ISA_source"]) == ("AVX", "environment")
    got = ct2_backend.resolve(use_mkl=False, cpu_isa="avx512",
                              environ={"CT2_USE_MKL": "1"}, vendor="TestVendor")
    assert (got["CT2_USE_MKL"], got["CT2_USE_MKL_source"]) == ("0", "given")
    assert got["CT2_FORCE_CPU_ISA"] == "AVX512"
    amd = ct2_backend.resolve(environ={}, vendor="AuthenticAMD",
                              flags=ct2_backend.ISA_FLAGS["AVX512"])
    assert amd["CT2_FORCE_CPU_ISA"] == "AVX512" and amd["CT2_USE_MKL"] is None
    got = ct2_backend.resolve(environ={}, vendor="OtherVendor")
    assert got["CT2_USE_MKL"] is None and got["CT2_USE_MKL_source"] == "ctranslate2"
    with pytest.raises(ct2_backend.CTranslate2BackendError, match="unknown CPU ISA 'SSE9'"):
        ct2_backend.resolve(cpu_isa="SSE9", environ={})


_CHILD = """
import json, os, sys
from tf_nmt.inference import ct2_backend
ct2 = ct2_backend.import_ctranslate2(use_mkl={mkl})
out = {{"env": os.environ.get("CT2_USE_MKL"), "applied": ct2_backend.applied(),
        "types": sorted(ct2.get_supported_compute_types("cpu"))}}
ct2_backend.import_ctranslate2(use_mkl={mkl})  # the same again is fine
try:
    ct2_backend.import_ctranslate2(use_mkl=not {mkl})
except ct2_backend.CTranslate2BackendError as err:
    out["refused"] = str(err)
print(json.dumps(out))
"""


@pytest.mark.parametrize("mkl", [True, False])
def test_backend_is_set_before_import_and_fixed_after(mkl):
    """In a fresh interpreter: the switch reaches CTranslate2 (with MKL it offers int16, oneDNN
    does not), is recorded as given, and a different request afterwards is one clear error."""
    pytest.importorskip("ctranslate2")
    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("the MKL backend is in x86-64 wheels only")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CT2_")}
    proc = subprocess.run([sys.executable, "-c", _CHILD.format(mkl=mkl)], capture_output=True,
                          text=True, env=env, cwd=REPO, timeout=120, check=True)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["env"] == ("1" if mkl else "0")
    assert ("int16" in out["types"]) == mkl
    assert out["applied"]["CT2_USE_MKL_source"] == "given"
    assert "already loaded in this process with CT2_USE_MKL=" in out["refused"]


def test_thread_layout():
    cores = usable_cores()
    assert thread_layout(3, 0) == (3, 1, "given")
    assert thread_layout(0, 2)[1:] == (2, "given") and thread_layout(0, 2)[0] == max(1, cores // 2)
    intra, inter, source = thread_layout(0, 0)
    assert intra * inter == cores and source.startswith("default")
    assert thread_layout(0, 0, "cuda") == (0, 1, "ctranslate2's default")


TOKENS = ["<pad>", "<unk>", "<s>", "</s>", "▁the", "▁house", "▁das", "▁Haus", "▁dog",
          "▁Hund", "▁der", "▁is", "▁ist", "▁big", "▁groß"]
ID = {t: i for i, t in enumerate(TOKENS)}


def ids(text):
    return [ID[t] for t in text.split()]


PAIRS = [(ids("▁the ▁house ▁is ▁big"), ids("▁das ▁Haus ▁ist ▁groß")),
         (ids("▁the ▁dog ▁is ▁big"), ids("▁der ▁Hund ▁ist ▁groß")),
         (ids("▁the ▁house"), ids("▁das ▁Haus")),
         (ids("▁the ▁dog"), ids("▁der ▁Hund"))]


def vmap_lines(text):
    return dict(line.split("\t") for line in text.splitlines())


def test_vmap_shortlists_by_cooccurrence_share():
    """Each source piece keeps the target pieces found with it most often (share of its pairs),
    best first, ties by id; the most frequent target pieces are always on and listed once."""
    text, summary = build_vmap(PAIRS, TOKENS, [0, 1, 2, 3], always=1, per_source=2)
    lines = vmap_lines(text)
    assert lines[""] == "▁das"  # six target pieces tie at 2 occurrences: the lowest id
    assert lines["▁house"] == "▁Haus ▁ist"  # Haus 2/2, then ist, groß 1/2 (das: always on)
    assert lines["▁dog"] == "▁Hund ▁der"    # both 2/2
    assert lines["▁is"] == lines["▁big"] == "▁ist ▁groß"
    assert lines["▁the"] == "▁Haus ▁Hund"   # everything 2/4: lowest ids
    assert summary == {"pairs": 4, "always": 1, "per_source": 2, "source_pieces": 5,
                       "mean_candidates_per_source": 2.0}
    text, _ = build_vmap(PAIRS, TOKENS, [0, 1, 2, 3], always=0, per_source=3)
    lines = vmap_lines(text)
    assert lines[""] == "" and lines["▁house"] == "▁das ▁Haus ▁ist"
    with pytest.raises(ValueError, match="per_source >= 1"):
        build_vmap(PAIRS, TOKENS, [0, 1, 2, 3], per_source=0)


def test_vmap_with_separate_vocabularies_keys_by_source_pieces():
    source_tokens = TOKENS[:4] + [t.upper() for t in TOKENS[4:]]
    text, _ = build_vmap(PAIRS, TOKENS, [0, 1, 2, 3], always=1, per_source=2,
                         source_tokens=source_tokens)
    lines = vmap_lines(text)
    assert lines["▁HOUSE"] == "▁Haus ▁ist" and "▁house" not in lines
