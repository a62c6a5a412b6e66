"""PyFlink's ``pyflink.datastream.connectors`` mirror."""
