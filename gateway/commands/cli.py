"""The ``ksgate`` command line: ``run`` a configured gateway, or a ``quickstart``."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
from collections.abc import Sequence

import structlog

from gateway.commands.acls import add_acls_parser
from gateway.commands.init import add_init_parser
from gateway.commands.quickstart import run_quickstart
from gateway.commands.quotas import add_quotas_parser
from gateway.commands.serving import install_event_loop_policy, serve
from gateway.commands.shadow_acls import run_acls_or_shadow_command
from gateway.commands.tokens import add_tokens_parser
from gateway.commands.users import add_users_parser
from gateway.config import ConfigError, GatewayConfig, load_config
from gateway.ops.logs import LOG_FORMATS, configure_logging, get_logger
from gateway.ops.metrics import ksgate_version
from gateway.upstream.client import UpstreamError
from pipeline.cli import add_audit_parser


def _cmd_run(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    configure_logging(config.log_level, args.log_format)
    if args.workers <= 1:
        install_event_loop_policy()
        asyncio.run(serve(config))
        return 0
    from gateway.ops.workers import run_workers

    def serve_one(index: int) -> int:
        install_event_loop_policy()
        structlog.contextvars.bind_contextvars(worker=index)  # connection ids repeat across workers
        try:
            asyncio.run(serve(worker_config(config, index), worker=index))
        except (ConfigError, UpstreamError) as exc:
            get_logger().error("worker_failed", worker=index, error=str(exc))
            return 2
        return 0

    return run_workers(args.workers, serve_one, stop_timeout_s=config.shutdown_timeout_ms / 1000 + 5)


def worker_config(config: GatewayConfig, index: int) -> GatewayConfig:
    """A worker's own audit file: rotating files cannot be shared between processes."""
    audit = config.settings.get("ksgate.audit.log.file")
    if not audit:
        return config
    settings = {**config.settings, "ksgate.audit.log.file": f"{audit}.worker-{index}"}
    return dataclasses.replace(config, settings=settings)


def _cmd_quickstart(args: argparse.Namespace) -> int:
    install_event_loop_policy()
    return run_quickstart(args.dir, args.port, args.upstream, args.listener_protocol, args.sni_domain)


def _add_log_format(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--log-format", choices=LOG_FORMATS, default=None,
                        help="json (default unless stderr is a terminal) or console (default on a terminal)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ksgate", description="Kafka security gateway")
    parser.add_argument("--version", action="version", version=f"ksgate {ksgate_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the gateway with a configuration file")
    _add_log_format(run)
    run.add_argument("--config", required=True, help="YAML configuration file")
    run.add_argument("--workers", type=int, default=1,
                     help="processes sharing the listeners with SO_REUSEPORT, one event loop each (default 1)")
    run.set_defaults(func=_cmd_run)
    quick = sub.add_parser("quickstart", help="start a local broker and a gateway in front of it")
    quick.add_argument("--dir", default="./quickstart", help="where to write client property files")
    quick.add_argument("--port", type=int, default=9092, help="gateway bootstrap port")
    quick.add_argument("--upstream", default=None, help="use this broker (host:port) instead of an embedded one")
    quick.add_argument("--listener-protocol", default="SASL_SSL", type=str.upper,
                       choices=("PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL"), help="the gateway listener's protocol")
    quick.add_argument("--sni-domain", default=None, metavar="DOMAIN",
                       help="one TLS port for everything, routed by SNI: bootstrap.DOMAIN and broker-<id>.DOMAIN "
                            "(the names must resolve to the gateway; the banner prints an /etc/hosts line)")
    _add_log_format(quick)
    quick.set_defaults(func=_cmd_quickstart)
    add_init_parser(sub)
    add_users_parser(sub)
    add_acls_parser(sub).set_defaults(func=run_acls_or_shadow_command)  # --shadow: the shadow ACL set
    add_tokens_parser(sub)
    add_quotas_parser(sub)
    add_audit_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Before anything can fail: every line, start-up errors included, in the one log format.
    # The one-shot commands log warnings and errors only (their output is their report, and
    # libraries' INFO chatter, such as py4j's under `audit`, stays out of it).
    serving = args.command in ("run", "quickstart")
    configure_logging("INFO" if serving else "WARNING", getattr(args, "log_format", None))
    try:
        result: int = args.func(args)
        return result
    except (ConfigError, UpstreamError, OSError) as exc:  # OSError: e.g. a listener port in use
        get_logger().error("startup_failed", error=str(exc))  # once: the log line is the message
        return 2


if __name__ == "__main__":
    sys.exit(main())
