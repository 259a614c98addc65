"""QUEUE_LABEL_KEY (issue 29, item 4): KAI's default, and a malformed key refused at start."""

from __future__ import annotations

from pathlib import Path

from tests.portal.test_settings import _manage

KEY = {"SECRET_KEY": "x7!Qp2-production-like-secret-key-with-enough-entropy-0123456789"}
SHOW = ["shell", "--no-imports", "-c", "from django.conf import settings; print(settings.QUEUE_LABEL_KEY)"]


def test_the_queue_label_key_is_kais_unless_set(tmp_path: Path) -> None:
    assert _manage(SHOW, KEY, tmp_path).stdout.strip() == "kai.scheduler/queue"
    assert _manage(SHOW, {**KEY, "QUEUE_LABEL_KEY": "runai/queue"}, tmp_path).stdout.strip() == "runai/queue"


def test_a_queue_label_key_that_is_no_label_key_is_refused_with_the_setting_named(tmp_path: Path) -> None:
    result = _manage(["check"], {**KEY, "QUEUE_LABEL_KEY": "runai/queue, kai.scheduler/queue"}, tmp_path)
    assert result.returncode != 0
    assert "QUEUE_LABEL_KEY='runai/queue, kai.scheduler/queue' is not a label key" in result.stderr
