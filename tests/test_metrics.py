

async def test_sink_writer_metrics_count_failed_writes_as_errors() -> None:
    """Flink's SinkWriterMetricGroup: a write whose delivery fails counts its records in
    numRecordsSendErrors (and the deprecated numRecordsOutErrors); a delivered one sets
    currentSendTime; both read through the operator's metric group."""
    import asyncio

    from streamflow.connectors.sink_metrics import SinkWriterMetrics
    from streamflow.runtime.metrics import MetricGroup, read_metrics

    registry: dict[str, object] = {}
    metrics = SinkWriterMetrics()
    metrics.attach(MetricGroup("sink[0]", registry))
    loop = asyncio.get_running_loop()
    ok, failed = loop.create_future(), loop.create_future()
    metrics.sent([b"ab", b"c"], [b"k", None])
    metrics.watch(ok, 2)
    metrics.watch(failed, 3)
    await asyncio.sleep(0.01)
    ok.set_result(None)
    failed.set_exception(RuntimeError("broker said no"))
    await asyncio.sleep(0)
    read = read_metrics(registry)
    assert read["sink[0].numRecordsSend"] == read["sink[0].numRecordsOut"] == 2
    assert read["sink[0].numBytesSend"] == 4
    assert read["sink[0].numRecordsSendErrors"] == read["sink[0].numRecordsOutErrors"] == 3
    assert read["sink[0].currentSendTime"] >= 10
    failed.exception()  # (retrieved)
