"""The `eosbench` command line: one argparse tree, one-line errors, documented exit codes.

This module only assembles it. Each command's arguments sit beside its handler in its room's
`commands.py` (local/, bench/, soak/, pipeline/); what every command shares (the one-line-error
parser, argument types, errors and exit codes) is in console/.
"""

from __future__ import annotations

import argparse
import sys

from eosbench.bench import commands as bench
from eosbench.console.arguments import OneLineArgumentParser
from eosbench.console.errors import run_handler
from eosbench.local import commands as local
from eosbench.pipeline import commands as pipeline
from eosbench.soak import commands as soak

# In the order `eosbench --help` lists the commands.
PARSERS = (local.add_broker_parser, local.add_topics_parser, local.add_acls_parser, local.add_setup_parser, local.add_package_parser,
           pipeline.add_produce_parser,
           pipeline.add_stream_parser, pipeline.add_verify_parser, bench.add_bench_parser, bench.add_report_parser,
           pipeline.add_demo_parser, local.add_prometheus_parser, local.add_cluster_parser, local.add_hdfs_parser,
           local.add_yarn_parser,
           local.add_s3_parser,
           soak.add_soak_parser)

HANDLERS = {"broker": local.cmd_broker, "topics": local.cmd_topics, "acls": local.cmd_acls, "setup": local.cmd_setup, "package": local.cmd_package,
            "demo": pipeline.cmd_demo, "produce": pipeline.cmd_produce, "bench": bench.cmd_bench,
            "stream": pipeline.cmd_stream, "verify": pipeline.cmd_verify, "prometheus": local.cmd_prometheus,
            "cluster": local.cmd_cluster, "hdfs": local.cmd_hdfs, "yarn": local.cmd_yarn, "s3": local.cmd_s3, "soak": soak.cmd_soak, "report": bench.cmd_report}


def version_line() -> str:
    """`eosbench --version`: eosbench's own version and the versions it runs against."""
    from importlib.metadata import PackageNotFoundError, version

    from conf.settings import load_jar_bundles

    def installed(package: str) -> str:
        try:
            return version(package)
        except PackageNotFoundError:
            return "not installed"

    kafka = next(a.rsplit(":", 1)[1] for a in load_jar_bundles()["kafka"].artifacts if ":kafka_2.13:" in a)
    import confluent_kafka

    return (f"eosbench {installed('eosbench')} (Kafka {kafka}, PySpark {installed('pyspark')},"
            f" confluent-kafka {installed('confluent-kafka')} on librdkafka {confluent_kafka.libversion()[0]},"
            f" delta-spark {installed('delta-spark')})")


class VersionAction(argparse.Action):
    """`--version`: print one unwrapped line and exit, looking the versions up only when asked."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print eosbench's version and the Kafka, Spark and client versions it runs against")

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_line())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """Return the full `eosbench` argument parser."""
    parser = OneLineArgumentParser(prog="eosbench", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action=VersionAction)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                     parser_class=OneLineArgumentParser)
    for add_parser in PARSERS:
        add_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one eosbench command and return its exit status."""
    args = build_parser().parse_args(argv)
    return run_handler(HANDLERS[args.command], args)


def entry_point() -> None:
    """Console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":
    entry_point()
