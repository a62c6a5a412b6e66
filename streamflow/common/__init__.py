"""PyFlink's ``pyflink.common`` mirror: thin re-exports of streamflow's implementations."""
