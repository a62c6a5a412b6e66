"""PyFlink's ``pyflink.datastream.formats``: the JSON and CSV row formats (``json``, ``csv``).

PyFlink's Avro, ORC and Parquet formats need Flink's Java format jars and are not mirrored
(docs/pyflink.md)."""
