"""What a victim scenario is made of: the victim stream's contributions and, once a scenario
has been simulated and worked, its outcome (KAI's ``solvers/scenario``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from scheduler.model import Job, Task


@dataclass
class Contribution:
    """What one victim job gives in one step of the victim stream."""

    job: Job
    tasks: list[Task]


@dataclass
class Outcome:
    """A simulated scenario that worked."""

    victims: list[Task]  # evicted and not re-placed
    moved: list[Task]  # evicted and re-placed elsewhere (Pipelined there)
    contributions: list[Contribution] = field(default_factory=list)
    origin: dict[str, str | None] = field(default_factory=dict)  # task -> node it ran on
