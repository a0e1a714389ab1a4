"""How an elastic attempt's errors are classified (single process, no launch): a broken
collective rolls back, whatever its message looks like (Horovod's shut-down text, Gloo's
transport text, our named allgathers); any other op error ends the job with its message.
Before this, an UnknownError whose text named neither reached Horovod's fallback, which
returned None, and the chief exited while the others waited for it (issue 15's hang)."""
import pytest

from tf_nmt.compat import tf
from tf_nmt.training import elastic

pytest.importorskip("horovod.common.exceptions")
from horovod.common.exceptions import HorovodInternalError  # noqa: E402

STACK = "\n  File \"/x/trainer.py\", line 1, in train\n    model.fit(...)\n"
BROKEN = {
    "horovod": "Horovod has been shut down. This was caused by an exception on one of the ranks",
    "gloo": "[/tmp/pip/third_party/compatible17_gloo/gloo/transport/tcp/unbound_buffer.cc:81] "
            "Timed out waiting 10000ms for recv operation to complete",
    "reset": "Read error [127.0.0.1]:7598: Connection reset by peer",
    "named gather": "Timed out waiting for the other ranks\n\t [[{{node graddrop_1}}]]",
}


def op_error(text, node="StatefulPartitionedCall"):
    return tf.errors.UnknownError(None, None, f"Graph execution error:\n\nDetected at node {node} "
                                              f"defined at (most recent call last):{STACK}{text}")


def raising(error):
    def attempt():
        raise error
    return attempt


@pytest.mark.parametrize("text", BROKEN.values(), ids=BROKEN.keys())
def test_a_broken_collective_rolls_back_and_says_why(text):
    said = []
    with pytest.raises(HorovodInternalError):
        elastic.run_attempt(raising(op_error(text)), said.append)
    assert said and "rolling back to the last commit" in said[0]
    assert text.splitlines()[0][:60] in said[0] and "model.fit" not in said[0]


def test_a_plain_graph_error_is_not_taken_for_a_collective():
    error = tf.errors.InvalidArgumentError(None, None, "Graph execution error:\n\nDetected at "
                                           f"node dense/MatMul defined at:{STACK}Matrix size-"
                                           "incompatible: In[0]: [2,3], In[1]: [4,5]")
    said = []
    with pytest.raises(RuntimeError, match="elastic: training failed .*Matrix size-incompatible"):
        elastic.run_attempt(raising(error), said.append)
    assert said == []


def test_a_successful_attempt_returns_its_result():
    assert elastic.run_attempt(lambda: "result", print) == "result"


def test_error_summary_drops_the_call_stack_and_is_bounded():
    text = op_error(BROKEN["horovod"]).message
    summary = elastic.error_summary(text)
    assert summary.startswith("Graph execution error: Detected at node StatefulPartitionedCall")
    assert "File" not in summary and BROKEN["horovod"] in summary
    assert len(elastic.error_summary("x" * 1000)) == 400


# Issue 45: classified by type where Horovod gives one, and the rollbacks are bounded.
from horovod.common.exceptions import HostsUpdatedInterrupt  # noqa: E402


def test_a_mismatch_between_ranks_is_fatal_even_when_it_names_horovod():
    # Horovod reports disagreeing ranks as a precondition error; it repeats after any rollback.
    error = tf.errors.FailedPreconditionError(
        None, None, "Mismatched Horovod allreduce tensor shapes: One rank sent a tensor of "
                    "shape [4], but another rank sent a tensor of shape [5]")
    assert elastic.failure_kind(error) == elastic.FATAL
    with pytest.raises(RuntimeError, match="training failed .*Mismatched"):
        elastic.run_attempt(raising(error), print, elastic.RollbackLimit(3))


def test_horovods_own_exceptions_are_classified_by_type():
    assert elastic.failure_kind(HorovodInternalError("allreduce failed")) == elastic.WORKER_LOST
    assert elastic.failure_kind(HostsUpdatedInterrupt(False)) == elastic.HOSTS_UPDATED
    assert elastic.failure_kind(ValueError("Horovod")) == elastic.FATAL  # text alone: no
    assert elastic.failure_kind(tf.errors.UnavailableError(None, None, "gloo: peer gone")) \
        == elastic.WORKER_LOST


def test_a_host_update_passes_through_uncounted_and_a_python_error_unchanged():
    limit = elastic.RollbackLimit(1)
    with pytest.raises(HostsUpdatedInterrupt):
        elastic.run_attempt(raising(HostsUpdatedInterrupt(True)), print, limit)
    with pytest.raises(KeyError):
        elastic.run_attempt(raising(KeyError("x")), print, limit)
    assert limit.in_a_row == 0


def test_rollbacks_from_the_same_commit_are_bounded():
    limit, said = elastic.RollbackLimit(2), []
    for _ in range(2):
        limit.started(100)
        with pytest.raises(HorovodInternalError):
            elastic.run_attempt(raising(op_error(BROKEN["gloo"])), said.append, limit)
    assert "(2 of at most 3 tries from this commit)" in said[-1]
    limit.started(100)
    with pytest.raises(RuntimeError, match=r"giving up after 2 rollbacks in a row to committed "
                       r"step 100 .*elastic_max_retries=2.*Timed out waiting") as info:
        elastic.run_attempt(raising(op_error(BROKEN["gloo"])), said.append, limit)
    assert not isinstance(info.value, HorovodInternalError)


def test_progress_between_losses_starts_the_count_again():
    limit = elastic.RollbackLimit(1)
    for step in (0, 50, 100, 150):  # a worker lost now and then: training gets past each commit
        limit.started(step)
        with pytest.raises(HorovodInternalError):
            elastic.run_attempt(raising(HorovodInternalError("lost")), print, limit)
    # A failure before the attempt got as far as its commit (no step known) counts as no progress.
    with pytest.raises(RuntimeError, match="giving up after 1 rollbacks"):
        elastic.run_attempt(raising(HorovodInternalError("lost")), print, limit)


def test_the_limit_is_a_checked_config_key():
    from tf_nmt.config import Config, ConfigError

    cfg = Config()
    assert cfg.train.elastic_max_retries >= 1
    cfg.train.comm, cfg.train.elastic_max_retries = "dense", 0
    with pytest.raises(ConfigError, match="elastic_max_retries=0"):
        elastic.check_elastic_config(cfg)


@pytest.mark.parametrize("how", ["code", "set", "preset"])
def test_an_ema_is_refused_however_it_was_set(how):
    """The weight EMA is not part of an elastic commit: refused whether the user gave it, a
    preset did, or code set it (config_usage only sees what the user gave)."""
    from tf_nmt.commands.quickstart import quickstart_config
    from tf_nmt.config import Config, ConfigError, load_config

    if how == "code":
        cfg = Config()
        cfg.train.ema_decay = 0.999
    elif how == "set":
        cfg = load_config(None, ["train.ema_decay=0.99"])
    else:  # the quickstart's recipe keeps an EMA
        cfg = quickstart_config("/tmp/unused-data", 45.0)
    with pytest.raises(ConfigError, match="train.ema_decay=.*not committed"):
        elastic.check_elastic_config(cfg)
    cfg.train.ema_decay = 0.0
    cfg.train.time_budget_minutes = 0.0
    elastic.check_elastic_config(cfg)
