"""Reasons are values: KAI's code and the decided numbers and references, worded only when shown.

The code is the one KAI puts at the head of the text (the portal's Decision and JobMessage rows
store it); tasks and jobs are referred to by engine key, so whoever shows a reason names them
(``render(reason, names)``), and the same reason always gives the same text.
"""

from __future__ import annotations

from scheduler import (
    Job,
    Node,
    Queue,
    QueueResource,
    Ref,
    Snapshot,
    Task,
    TaskState,
    reasons,
    render,
    run_cycle,
)
from scheduler.model import Config


def _over_limit_cycle():
    running = Job("r", queue="q", tasks=[Task("r-0", gpu=2, state=TaskState.RUNNING, node="n0")])
    pending = Job("p", queue="q", tasks=[Task("p-0", gpu=3)])
    q = Queue("q", resources={"gpu": QueueResource(0, 4, 1)})
    return run_cycle(Snapshot([Node("n0", gpus=8)], [q], [running, pending]), Config(actions=("allocate",)))


def test_the_job_message_carries_kai_code_and_the_numbers_decided() -> None:
    r = _over_limit_cycle()
    message = r.job_messages["p"]
    assert message.code == "OverLimit"
    ((code, limit),) = message.params[0]
    assert code == "OverLimit" and limit.params == ("q", "gpu", 4.0, 2.0, 3.0)
    assert render(message).startswith(f"{message.code}: q quota has reached the allowable limit of GPUs.")
    assert r.tasks["p-0"].reason is message  # each pending pod shows its job's message


def test_a_pod_text_names_the_pod_as_the_caller_says_and_codes_as_unschedulable() -> None:
    reason = reasons.pod_not_found(
        Ref("gpu-pod-4-0", "team-b"), reasons.fit_error({reasons.PODS_EXCEEDED: 2})
    )
    assert reason.code == reasons.UNSCHEDULABLE
    assert render(reason) == (
        "Resources were not found for pod team-b/gpu-pod-4-0 due to: no nodes with enough resources were "
        "found: 2 node(s) pod number exceeded."
    )
    own = {"gpu-pod-4-0": "gpu-pod"}
    assert render(reason, lambda ref: own.get(ref.key, ref.key)).startswith(
        "Resources were not found for pod team-b/gpu-pod due to:"
    )


def test_a_reason_keeps_the_values_of_its_moment() -> None:
    used = {"gpu": 1.0, "cpu": 0.0, "memory": 0.0}
    line = reasons.queue_usage_line("a", used, used, used, 100)
    before = render(line)
    used["gpu"] = 5.0  # the engine's state moves on after the decision
    assert render(line) == before
