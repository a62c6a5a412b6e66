"""Shared fixtures. ``kafka``: one test broker per session (noida-db on a free loopback port), or the
broker named by STREAMFLOW_KAFKA_BOOTSTRAP. Every Spark driver JVM the tests start gets the options
of tests/spark_jvm.py (C1 only, class-data sharing)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from spark_jvm import driver_options

from streamflow.testing.kafka_broker import KafkaBroker


@pytest.fixture(scope="session", autouse=True)
def _spark_driver_options() -> Iterator[None]:
    """``SPARK_SUBMIT_OPTS`` for this process's Spark session (started by the first Spark test,
    so that it can dump the class-data archive when none exists: tests/spark_jvm.py)."""
    before = os.environ.get("SPARK_SUBMIT_OPTS")
    os.environ["SPARK_SUBMIT_OPTS"] = driver_options(dumpable=True)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("SPARK_SUBMIT_OPTS", None)
        else:
            os.environ["SPARK_SUBMIT_OPTS"] = before


@pytest.fixture(scope="session")
def kafka() -> Iterator[KafkaBroker]:
    broker = KafkaBroker().start()
    try:
        yield broker
    finally:
        broker.close()
