"""Operator tooling behind the ``streamflow`` command (checkpoint inspection, REST client)."""
