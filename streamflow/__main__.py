"""``python -m streamflow``: the same command as the ``streamflow`` console script."""

from .cli import main

raise SystemExit(main())
