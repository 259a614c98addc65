"""A pending pod's own text, as KAI's status updater writes it on the pod's event and
PodScheduled condition (issue 29, item 5): the pod's fit error, counting every node, including
those that fail its node selector; the "Resources were not found for pod ..." text is the job's
(the PodGroup's), and stays so."""

from __future__ import annotations

from scheduler import Config, Job, Node, Queue, QueueResource, Snapshot, Task, run_cycle

QUEUE = Queue("q", resources={"gpu": QueueResource(-1, -1, 1)})


def _run(
    nodes: list[Node], selector: dict[str, str] | None = None, gpu: float = 2
) -> tuple[str | None, str | None]:
    job = Job("x", queue="q", namespace="ns", tasks=[Task("x-0", gpu=gpu)], node_selector=selector or {})
    result = run_cycle(Snapshot(nodes, [QUEUE], [job]), Config())
    return result.tasks["x-0"].text(), result.job_message("x")


def test_the_pods_text_is_its_fit_error_over_every_node_as_kai_words_it() -> None:
    nodes = [Node("other", gpus=8, labels={"type": "b"})]
    nodes += [Node(f"small-{i}", gpus=1, labels={"type": "a"}) for i in range(6)]

    pod_text, job_text = _run(nodes, {"type": "a"})

    assert pod_text == (
        "no nodes with enough resources were found: 1 node(s) didn't match Pod's node affinity/selector. \n"
        "6 node(s) didn't have enough resources: GPUs."
    )
    assert job_text == f"PodSchedulingErrors: Resources were not found for pod ns/x-0 due to: {pod_text}."


def test_with_no_node_at_all_the_pods_text_has_no_counts_and_no_full_stop() -> None:
    """KAI's TasksFitErrors.Error() with no node reasons: its base message alone (a pod asking
    for nothing, so that no pre-predicate refuses it first)."""
    pod_text, job_text = _run([], gpu=0)
    assert pod_text == "no nodes with enough resources were found"
    assert job_text == (
        "PodSchedulingErrors: Resources were not found for pod ns/x-0 due to: "
        "no nodes with enough resources were found."
    )
