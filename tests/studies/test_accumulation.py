"""The analysis of the accumulation study on synthetic per-rank records (the measurement
itself runs under horovodrun; see tests/parallel/test_exchange_sizes.py)."""
import pytest

from experiments.accumulation import study as accumulation


@pytest.fixture(scope="module")
def study():
    return accumulation


def totals(slice_b, gathered, emb_dense, rest):
    off = {"contributed_bytes": slice_b + rest, "buffer_bytes": gathered + rest,
           "sparse_contributed_bytes": slice_b, "sparse_buffer_bytes": gathered,
           "sparse_dense_bytes": emb_dense, "dense_bytes": rest, "sparse_rows": 0}
    on = {"contributed_bytes": emb_dense + rest, "buffer_bytes": emb_dense + rest,
          "sparse_contributed_bytes": 0, "sparse_buffer_bytes": 0, "sparse_dense_bytes": 0,
          "dense_bytes": emb_dense + rest, "sparse_rows": 0}
    return {"off": off, "on": on}


def ranks_with(slices, emb_dense=800, rest=1000, error=0):
    gathered = sum(slices)
    return [{"steps": [{"untied": totals(s, gathered + (error if r == 0 else 0), emb_dense, rest)}]}
            for r, s in enumerate(slices)]


def test_summary_of_two_ranks(study):
    row = study.summarise(ranks_with([300, 500]), "untied")
    assert row["ranks"] == 2 and row["allgather_model_max_error_bytes"] == 0
    assert row["off_buffer_bytes"] == 800 + 1000 and row["on_buffer_bytes"] == 1800
    assert row["off_contributed_bytes"] == (300 + 500) / 2 + 1000
    # received: the other rank's slice (measured) + ring allreduce of the dense rest (model)
    assert row["off_received_bytes"] == (500 + 300) / 2 + 1000
    assert row["on_received_bytes"] == 1800
    assert row["sparse_buffer_ratio"] == 1.0 and row["buffer_ratio"] == 1.0
    assert (row["sparse_slice_bytes_min"], row["sparse_slice_bytes_max"]) == (300, 500)


def test_a_gathered_buffer_that_is_not_the_sum_of_slices_is_reported(study):
    row = study.summarise(ranks_with([300, 500], error=64), "untied")
    assert row["allgather_model_max_error_bytes"] == 64


def test_no_sparse_gradient_gives_no_embedding_ratio(study):
    row = study.summarise(ranks_with([0, 0], emb_dense=0), "untied")
    assert row["sparse_buffer_ratio"] is None and row["buffer_ratio"] == 1.0


def test_combine_extrapolates_with_the_mean_slice_and_the_table_marks_sources(study):
    rows = [study.summarise(ranks_with([300, 500]), "untied"),
            study.summarise(ranks_with([200, 400, 300, 300]), "untied")]
    variants = study.combine({"untied": rows}, (64,))
    data = variants["untied"]
    assert data["slice_bytes_per_rank"] == pytest.approx((400 + 300) / 2)
    assert [r["ranks"] for r in data["curve"]] == [2, 4, 64]
    big = data["curve"][-1]  # the allgather buffer grows as N x slice, the allreduce one stays
    assert big["off_buffer_bytes"] == pytest.approx(64 * 350 + 1000)
    assert big["on_buffer_bytes"] == pytest.approx(800 + 1000)
    variants["untied"]["tie_embeddings"] = False
    result = {"batch_tokens": 5000, "tokens_per_rank_step": {"sentences": 10.0},
              "seed": {"ranks": 64, "ratio": 82.0}, "variants": variants}
    text = study.table(result)
    assert "meas" in text and "extr" in text and "at 64 ranks, untied" in text
