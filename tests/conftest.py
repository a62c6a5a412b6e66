"""Shared fixtures. ``kafka``: one test broker per session (noida-db on a free loopback port), or the
broker named by STREAMFLOW_KAFKA_BOOTSTRAP."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from streamflow.testing.kafka_broker import KafkaBroker


@pytest.fixture(scope="session")
def kafka() -> Iterator[KafkaBroker]:
    broker = KafkaBroker().start()
    try:
        yield broker
    finally:
        broker.close()
