"""The browser pages and REST API of queues, jobs, teams and nodes.

They show what several layers below hold (a queue's page: its quotas, its usage history and a
what-if preview; a job's page: its decisions and forecast), so they sit on top of the layers
(pyproject.toml's layers contract), beside the reports. The apps below keep their models,
rules and forms."""
