"""``python -m gateway …`` is ``ksgate …`` (for a source tree without the console script)."""

from gateway.commands.cli import main

raise SystemExit(main())
