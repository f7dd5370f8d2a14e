"""``python -m pipeline report|recommend|replay|alerts|generate …``: the ``ksgate audit`` commands on their own.

With ksgate installed on the driver it is also a spark-submit script: ``spark-submit pipeline/__main__.py report …``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pipeline.cli import add_audit_parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline", description="ksgate audit-log pipeline")
    add_audit_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["audit", *(sys.argv[1:] if argv is None else argv)])
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
