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
