"""The cases of Apache Flink's ``pyflink/datastream/tests/test_state_ttl_config.py`` and
``test_state_backend.py``, on streamflow.

Each test is one case of Flink's file: the same calls and the same expected values. Flink's
TTL cases patch ``pyflink.common.time.get_gateway`` to prove that no JVM is asked for;
streamflow has no gateway, so the ports check the values alone (each says so).

``test_state_backend.py`` (the newest stored version, apache/flink ``a835f31``) tests
PyFlink 1.x's ``MemoryStateBackend``, ``FsStateBackend`` and ``RocksDBStateBackend``,
which Flink 2.0 removed; the apache-flink 2.3.0 API streamflow follows has
``HashMapStateBackend`` and ``EmbeddedRocksDBStateBackend``. The RocksDB cases whose
property 2.3's ``EmbeddedRocksDBStateBackend`` still has run on it (db storage paths,
predefined options, options factory, transfer threads, incremental flag). Left out:
``MemoryStateBackendTests`` (4 cases) and ``FsStateBackendTests`` (3): the classes, their
max state size, asynchronous-snapshot flag, file-size threshold and checkpoint path are
gone from Flink 2.x (checkpoint storage is ``CheckpointConfig``'s business);
``test_get_checkpoint_backend`` (the same: RocksDB no longer wraps an FsStateBackend);
``test_get_set_ttl_compaction_filter`` (Flink 1.14 removed the switch: the filter is
always on); ``test_create_custom_state_backend`` (a Java state backend factory: no JVM).
"""

from __future__ import annotations

import pickle

import pytest
from pyflink_harness import known_failures

from streamflow.common.time import Duration, Time
from streamflow.datastream.state import StateTtlConfig
from streamflow.datastream.state_backend import EmbeddedRocksDBStateBackend, PredefinedOptions

FAILING: dict[str, str] = {}


_known_failure = known_failures(FAILING)


# ---- test_state_ttl_config.py: StateTtlConfigTests ----


def test_default_cleanup_without_gateway() -> None:
    # (Flink patches get_gateway to fail if asked: streamflow has none to ask.)
    config = StateTtlConfig.new_builder(Time.days(1)).build()
    strategy = config.get_cleanup_strategies().get_rocksdb_compact_filter_cleanup_strategy()
    assert strategy.get_query_time_after_num_entries() == 1000


@pytest.mark.parametrize("arguments", [(), (None,), (0,), (False,), ("",)])
def test_explicit_cleanup_without_gateway(arguments: tuple) -> None:
    builder = StateTtlConfig.new_builder(Time.days(1))
    config = builder.cleanup_in_rocksdb_compact_filter(17, *arguments).build()
    strategy = config.get_cleanup_strategies().get_rocksdb_compact_filter_cleanup_strategy()
    assert strategy.get_query_time_after_num_entries() == 17


@pytest.mark.parametrize("explicit_cleanup", [False, True])
def test_cleanup_round_trip_without_gateway(explicit_cleanup: bool) -> None:
    # Flink runs this with 'pickle' and 'protobuf'; the protobuf form (_to_proto/_from_proto)
    # is PyFlink's Python-to-JVM wire format, which streamflow has no use for: pickle only.
    builder = StateTtlConfig.new_builder(Time.days(1))
    if explicit_cleanup:
        builder.cleanup_in_rocksdb_compact_filter(17)
    config = builder.build()
    restored = pickle.loads(pickle.dumps(config))
    strategy = restored.get_cleanup_strategies().get_rocksdb_compact_filter_cleanup_strategy()
    assert restored.get_ttl() == Time.days(1)
    assert strategy.get_query_time_after_num_entries() == (17 if explicit_cleanup else 1000)


def test_default_duration_is_created_by_accessor() -> None:
    # Flink checks the accessor asks the gateway for java.time.Duration.ofDays(30) (and the
    # constructor does not); the port checks the value it returns: 30 days.
    strategy = StateTtlConfig.CleanupStrategies.RocksdbCompactFilterCleanupStrategy(17)
    duration = strategy.get_periodic_compaction_time()
    assert isinstance(duration, Duration)
    assert duration == Duration.of_days(30)


@pytest.mark.parametrize("milliseconds", [0, 3600000])
def test_explicit_duration_is_preserved(milliseconds: int) -> None:
    duration = Duration.of_millis(milliseconds)
    config = StateTtlConfig.new_builder(Time.days(1)).cleanup_in_rocksdb_compact_filter(17, duration).build()
    strategy = config.get_cleanup_strategies().get_rocksdb_compact_filter_cleanup_strategy()
    assert strategy.get_periodic_compaction_time() is duration


# ---- test_state_backend.py: RocksDBStateBackendTests, on 2.3's EmbeddedRocksDBStateBackend ----


def test_create_rocks_db_state_backend() -> None:
    # RocksDBStateBackend("file://var/checkpoints/", True/False): 2.3's constructor takes only
    # the incremental flag (the checkpoint path moved to CheckpointConfig).
    assert EmbeddedRocksDBStateBackend() is not None
    assert EmbeddedRocksDBStateBackend(True) is not None
    assert EmbeddedRocksDBStateBackend(True).is_incremental_checkpoints_enabled()
    # Full (non-incremental) RocksDB checkpoints are refused loudly, not ignored.
    with pytest.raises(ValueError, match="always incremental"):
        EmbeddedRocksDBStateBackend(False)


def test_get_set_db_storage_paths() -> None:
    storage_path = [
        "file://var/db_storage_dir1/",
        "file://var/db_storage_dir2/",
        "file://var/db_storage_dir3/",
    ]
    expected = ["/db_storage_dir1", "/db_storage_dir2", "/db_storage_dir3"]
    state_backend = EmbeddedRocksDBStateBackend()
    state_backend.set_db_storage_paths(*storage_path)
    assert state_backend.get_db_storage_paths() == expected


def test_db_storage_paths_relative_and_non_local() -> None:
    # Not in Flink's file: the rest of Flink's setDbStoragePaths (a relative path or a
    # non-local scheme is refused, no path resets to the default).
    state_backend = EmbeddedRocksDBStateBackend()
    state_backend.set_db_storage_paths("/var/rocks/dir/", "file:///var/other")
    assert state_backend.get_db_storage_paths() == ["/var/rocks/dir", "/var/other"]
    with pytest.raises(ValueError, match="Relative paths"):
        state_backend.set_db_storage_paths("rocks/dir")
    with pytest.raises(ValueError, match="non-local scheme"):
        state_backend.set_db_storage_paths("hdfs://namenode:9000/rocks")
    state_backend.set_db_storage_paths()
    assert state_backend.get_db_storage_paths() == []


def test_get_set_predefined_options() -> None:
    state_backend = EmbeddedRocksDBStateBackend()
    assert state_backend.get_predefined_options() == PredefinedOptions.DEFAULT
    for options in (
        PredefinedOptions.SPINNING_DISK_OPTIMIZED_HIGH_MEM,
        PredefinedOptions.SPINNING_DISK_OPTIMIZED,
        PredefinedOptions.FLASH_SSD_OPTIMIZED,
        PredefinedOptions.DEFAULT,
    ):
        state_backend.set_predefined_options(options)
        assert state_backend.get_predefined_options() == options


def test_get_set_options() -> None:
    state_backend = EmbeddedRocksDBStateBackend()
    assert state_backend.get_options() is None
    # Flink loads the named Java RocksDBOptionsFactory; streamflow's RocksDB (rocksdict) cannot
    # run a Java class, so set_options refuses it with the reason rather than ignoring it.
    with pytest.raises(NotImplementedError, match="RocksDBOptionsFactory"):
        state_backend.set_options(
            "org.apache.flink.contrib.streaming.state.DefaultConfigurableOptionsFactory"
        )
    assert state_backend.get_options() is None


def test_get_set_number_of_transfering_threads() -> None:
    # 2.3 names the methods *_transfer_threads and defaults to 4 threads
    # (state.backend.rocksdb.checkpoint.transfer.thread.num); the 1.x file expects 1.
    state_backend = EmbeddedRocksDBStateBackend()
    assert state_backend.get_number_of_transfer_threads() == 4
    state_backend.set_number_of_transfer_threads(4)
    assert state_backend.get_number_of_transfer_threads() == 4
    # Flink's precondition: the number must be positive.
    with pytest.raises(ValueError, match="greater than zero"):
        state_backend.set_number_of_transfer_threads(0)
