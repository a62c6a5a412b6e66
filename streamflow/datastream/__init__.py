"""PyFlink's ``pyflink.datastream`` mirror: thin re-exports of streamflow's implementations."""
