"""``python -m dashboard.cli``: the ``recall`` command."""

from dashboard.cli import main

raise SystemExit(main())
