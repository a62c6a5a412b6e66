"""streamflow: stream processing for Python on asyncio."""
