"""Least privilege, proven on the secured broker: the pipeline runs on exactly `eosbench acls`' set, and not on less.

The documented walk-through runs as written, from a shell: an admin creates the input and output
and runs `acls --apply` (which creates the dead-letter topic too), then a fresh user produces,
streams and verifies. A SCRAM user holding only the printed ACLs fills the input (transactions, a
third aborted), streams it through the transactional sink (poison records included, so the
dead-letter topic is written) and verifies it, as one exact multiset. A stream whose dead-letter
topic is missing, and whose user may not create it, is refused in one line naming the admin's
command. Then each ACL is taken away in turn, from a pipeline of its own, and the smallest command
that needs it stops with one line naming the missing permission, exit 3; what was committed still
verifies (as the admin).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from conf.client_config import Connection
from conf.failures import ACLS_HINT
from eosbench.cli import main
from eosbench.local.acl_set import Acl, PipelineAccess, pipeline_acls, render_acls
from eosbench.local.kafka_admin import (cluster_metadata, create_acls, create_dead_letter_topic, create_topic,
                                        delete_acls, describe_topic, principal_acls)
from streaming.process import POISON_PREFIX
from streaming.verify.verifier import verify

REPO = Path(__file__).resolve().parents[2]
USER = "lp-user"
PASSWORD = "lp-" + uuid.uuid4().hex  # unique per run, so that the secrets test can grep for it
PRINCIPAL = f"User:{USER}"


@pytest.fixture(scope="module")
def user_properties(secured_cluster) -> Path:
    """The least-privilege user's client.properties (it holds no ACL until a test grants some)."""
    return secured_cluster.add_scram_user(USER, PASSWORD)


@dataclass
class Pipeline:
    """One pipeline's topics, app id and ACL set on the secured cluster, each test's own."""

    access: PipelineAccess
    admin: Connection
    payloads: Path

    @property
    def acls(self) -> list[Acl]:
        """The set `eosbench acls` prints for it."""
        return pipeline_acls(self.access)

    def run(self, capsys, *args: str, config: Path) -> tuple[int, str, str]:
        """Run one eosbench command in this process, as the principal of `config`."""
        capsys.readouterr()
        code = main([*args, "--command-config", str(config)])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    def produce(self, capsys, config: Path, records: int = 300) -> tuple[int, str, str]:
        """Fill the input: transactions of 20, a third aborted, every seventh payload a poison record."""
        return self.run(capsys, "produce", "--topic", self.access.input_topic, "--num-records", str(records),
                        "--payload-file", str(self.payloads), "--throughput", "-1", "--records-per-transaction", "20",
                        "--transaction-abort-ratio", "0.3", "--seed", "3",
                        "--transactional-id", self.access.producer_transactional_id, config=config)

    def stream(self, capsys, config: Path, checkpoint: Path, *extra: str) -> tuple[int, str, str]:
        """Stream the input through the transactional sink, once, to its end (`extra`: more stream flags)."""
        return self.run(capsys, "stream", "--input-topic", self.access.input_topic, "--output-topic",
                        self.access.output_topic, "--app-id", self.access.app_id, "--checkpoint", str(checkpoint),
                        "--offsets-retention-minutes", "10080", *extra, config=config)

    def apply_acls(self, capsys, config: Path) -> tuple[int, str, str]:
        """`eosbench acls --apply` for this pipeline's principal."""
        a = self.access
        return self.run(capsys, "acls", "--app-id", a.app_id, "--principal", a.principal, "--input-topic",
                        a.input_topic, "--output-topic", a.output_topic, "--producer-transactional-id",
                        a.producer_transactional_id, "--apply", config=config)

    def verify(self, capsys, config: Path) -> tuple[int, str, str]:
        """`eosbench verify --app-id`."""
        return self.run(capsys, "verify", "--input-topic", self.access.input_topic, "--output-topic",
                        self.access.output_topic, "--app-id", self.access.app_id, config=config)

    def verified_as_admin(self):
        """The live verify (what the group's offsets say was committed), as the admin."""
        a = self.access
        return verify(self.admin, a.input_topic, a.output_topic, a.app_id, a.dead_letter, live=True,
                      stable_timeout_s=30)


@pytest.fixture(scope="module")
def payloads(tmp_path_factory) -> Path:
    """Seven payloads for --payload-file, one of them poison: a seeded draw of 100 records holds some of each."""
    path = tmp_path_factory.mktemp("payloads") / "payloads.txt"
    path.write_text("\n".join([f"{POISON_PREFIX.decode()}-7"] + [f"value-{i}" for i in range(6)]) + "\n")
    return path


@pytest.fixture
def new_pipeline(secured_cluster, admin_properties, user_properties, payloads):
    """Make a pipeline of fresh topics and app id: the admin creates its input and output, then (with
    `applied`) does what `acls --apply` does: creates the dead-letter topic and grants the ACL set minus `without`."""

    def make(partitions: int = 1, without: Acl | None = None, applied: bool = True) -> Pipeline:
        tag = uuid.uuid4().hex[:8]
        access = PipelineAccess(app_id=f"lp-{tag}", principal=PRINCIPAL, input_topic=f"lp-in-{tag}",
                                output_topic=f"lp-out-{tag}", producer_transactional_id=f"lp-fill-{tag}")
        admin = secured_cluster.connection
        for topic, count in ((access.input_topic, partitions), (access.output_topic, 2)):
            create_topic(admin, topic, count, 1)
        if applied:
            create_dead_letter_topic(admin, access.output_topic, access.dead_letter)
            create_acls(admin, [acl for acl in pipeline_acls(access) if acl != without])
        return Pipeline(access, admin, payloads)

    return make


def test_acls_apply_creates_the_dead_letter_topic_and_exactly_the_printed_set(new_pipeline, capsys, admin_properties):
    pipeline = new_pipeline(applied=False)
    a = pipeline.access
    code, out, err = pipeline.apply_acls(capsys, admin_properties)
    assert (code, err) == (0, "")
    created, adding, current = re.fullmatch(r"(.*?\n)(Adding ACLs.*?)(Current ACLs.*)", out, re.DOTALL).groups()
    # Shaped like the output: its two partitions, its replication factor (1, of one broker).
    assert created == f"created topic {a.dead_letter} (2 partitions, replication factor 1)\n"
    assert len(describe_topic(pipeline.admin, a.dead_letter).partitions) == 2
    assert adding == render_acls(pipeline.acls, heading="Adding")
    # The user holds the ACLs of the other tests' pipelines too: this pipeline's are exactly the set.
    held = [block for block in current.split("\n\n") if f"lp-{a.app_id[3:]}" in block
            or a.input_topic in block or a.output_topic in block or a.producer_transactional_id in block]
    assert "\n\n".join(held).rstrip("\n") + "\n" == render_acls(pipeline.acls)


def test_acls_apply_leaves_an_existing_dead_letter_topic_as_it_is(new_pipeline, capsys, admin_properties):
    pipeline = new_pipeline()
    code, out, err = pipeline.apply_acls(capsys, admin_properties)
    assert (code, err) == (0, "")
    assert out.startswith("Adding ACLs")
    assert len(describe_topic(pipeline.admin, pipeline.access.dead_letter).partitions) == 2


def walk_through() -> tuple[Path, str]:
    """The least-privilege walk-through's bash block, from whichever page holds it (README.md or docs/), as written."""
    for page in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        for block in re.findall(r"```bash\n(.*?)```", page.read_text(), re.DOTALL):
            if "eosbench acls" in block and "--apply" in block and "eosbench stream" in block:
                return page, block
    raise AssertionError("no bash block in README.md or docs/ runs acls --apply and then stream")


def test_the_documented_walk_through_runs_as_written(secured_cluster, admin_properties, tmp_path):
    page, block = walk_through()
    joined = block.replace("\\\n", " ")  # continuation lines, as bash reads them
    commands = [line for line in joined.splitlines() if line.startswith("eosbench ")]
    admin_steps = [line.split()[1] for line in commands if "admin.properties" in line]
    user_steps = [line.split()[1] for line in commands if "admin.properties" not in line]
    # The admin creates the input and output only (`acls --apply` makes the dead-letter topic); the user runs the rest.
    assert admin_steps == ["topics", "topics", "acls"] and ".dlq" not in block, page
    assert user_steps == ["produce", "stream", "verify"], page
    principal = re.search(r"--principal (User:(\S+))", block)
    user_config = re.search(r"eosbench produce .*--command-config (\S+)", joined)[1]
    shutil.copy(admin_properties, tmp_path / "admin.properties")
    shutil.copy(secured_cluster.add_scram_user(principal[2], "wt-" + uuid.uuid4().hex), tmp_path / user_config)
    environment = {name: os.environ[name] for name in ("HOME", "USER", "LANG", "TMPDIR", "JAVA_HOME", "EOSBENCH_HOME")
                   if name in os.environ}
    environment["PATH"] = os.pathsep.join([str(REPO / ".venv" / "bin"), os.environ["PATH"]])
    completed = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=tmp_path, env=environment,
                               capture_output=True, text=True, timeout=900)
    assert completed.returncode == 0, f"{page}:\n{completed.stderr[-3000:]}"
    flags = dict(re.findall(r"--(input-topic|output-topic|app-id) (\S+)", block))
    held = principal_acls(secured_cluster.connection, principal[1])
    assert held == pipeline_acls(PipelineAccess(flags["app-id"], principal[1], flags["input-topic"],
                                                flags["output-topic"]))
    topics = cluster_metadata(secured_cluster.connection).topics
    assert len(topics[f"{flags['output-topic']}.dlq"].partitions) == len(topics[flags["output-topic"]].partitions)
    report = verify(secured_cluster.connection, flags["input-topic"], flags["output-topic"], flags["app-id"],
                    f"{flags['output-topic']}.dlq")
    assert report.ok and report.input_committed > 0, report.violations
    assert report.output_committed + report.dead_lettered == report.input_committed


def test_a_stream_whose_dead_letter_topic_is_missing_is_refused_with_the_admin_command(new_pipeline, capsys,
                                                                                      user_properties, tmp_path):
    pipeline = new_pipeline(applied=False)
    a = pipeline.access
    create_acls(pipeline.admin, pipeline.acls)  # every ACL, granted by hand: no dead-letter topic was made
    code, out, err = pipeline.stream(capsys, user_properties, tmp_path / "checkpoint")
    assert (code, err) == (3, (
        f"eosbench: error: dead-letter topic '{a.dead_letter}' is missing (or hidden from {PRINCIPAL}), and {PRINCIPAL}"
        f" may not create it; an admin creates it with the pipeline's ACLs: `eosbench acls --app-id {a.app_id}"
        f" --principal {PRINCIPAL} --input-topic {a.input_topic} --output-topic {a.output_topic} --apply"
        " --command-config ADMIN.properties`\n")), out
    assert a.dead_letter not in cluster_metadata(pipeline.admin).topics


# The grouped source over SASL_SSL too: its driver Admin and its consumers take --command-config's settings.
@pytest.mark.parametrize("stream_flags", [(), ("--source", "grouped", "--txn-scope", "slot")], ids=["spark", "grouped"])
def test_the_whole_pipeline_runs_on_exactly_these_acls(new_pipeline, capsys, user_properties, tmp_path, stream_flags):
    pipeline = new_pipeline(partitions=2)
    code, out, err = pipeline.produce(capsys, user_properties)
    assert code == 0, err
    code, out, err = pipeline.stream(capsys, user_properties, tmp_path / "checkpoint", *stream_flags)
    assert code == 0, err
    code, out, err = pipeline.verify(capsys, user_properties)
    assert code == 0, err
    report = json.loads(out)
    assert report["violations"] == []
    assert (report["duplicates"], report["lost"], report["aborted_reads"], report["key_surplus"],
            report["key_deficit"]) == (0, 0, 0, 0, 0)
    assert report["input_aborted"] > 0 and report["dead_lettered"] > 0
    assert report["output_committed"] + report["dead_lettered"] == report["input_committed"]


def _acl(pipeline: Pipeline, resource_type: str, name: str, operation: str) -> Acl:
    return next(acl for acl in pipeline.acls if (acl.resource_type, acl.name, acl.operation) == (
        resource_type, name, operation))


# (the ACL taken away, the smallest command that needs it, the resource its error names)
REMOVALS = [
    ("TOPIC", "input", "READ", "stream", "input"),
    ("TOPIC", "input", "WRITE", "produce", "input"),
    ("TOPIC", "output", "WRITE", "stream", "output"),
    ("TOPIC", "output", "READ", "verify", "output"),
    ("TOPIC", "dead_letter", "WRITE", "stream", "dead_letter"),
    ("TOPIC", "dead_letter", "READ", "stream", "dead_letter"),  # the owner record is an offset of its partition 0
    ("GROUP", "app_id", "READ", "stream", "app_id"),
    ("GROUP", "owner_group", "READ", "stream", "owner_group"),
    ("TRANSACTIONAL_ID", "sink", "WRITE", "stream", "sink_id"),
    ("TRANSACTIONAL_ID", "producer_transactional_id", "WRITE", "produce", "producer_transactional_id"),
]
ERRORS = {"TOPIC": "TOPIC_AUTHORIZATION_FAILED", "GROUP": "GROUP_AUTHORIZATION_FAILED",
          "TRANSACTIONAL_ID": "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"}


def _name(access: PipelineAccess, which: str) -> str:
    # sink_id: the first id the stream's transactions use, a slot's, since auto gives a new group slot scope.
    return {"input": access.input_topic, "output": access.output_topic, "dead_letter": access.dead_letter,
            "app_id": access.app_id, "owner_group": f"{access.app_id}.owner", "sink": f"{access.app_id}.",
            "sink_id": f"{access.app_id}.slot.0",
            "producer_transactional_id": access.producer_transactional_id}[which]


@pytest.mark.parametrize("resource_type,which,operation,command,named", REMOVALS,
                         ids=[f"{r[0]}-{r[1]}-{r[2]}" for r in REMOVALS])
def test_each_acl_taken_away_stops_the_run_with_one_line(new_pipeline, capsys, user_properties, admin_properties,
                                                         tmp_path, resource_type, which, operation, command, named):
    pipeline = new_pipeline()
    access = pipeline.access
    missing = _acl(pipeline, resource_type, _name(access, which), operation)
    delete_acls(pipeline.admin, [missing])
    if command != "produce":  # the input is filled by the admin
        code, _, err = pipeline.produce(capsys, admin_properties, records=100)
        assert code == 0, err
    if command == "verify":  # the stream needs no READ on what it writes: verify then has output to read
        code, _, err = pipeline.stream(capsys, user_properties, tmp_path / "checkpoint")
        assert code == 0, err
    run = {"produce": lambda: pipeline.produce(capsys, user_properties, records=100),
           "stream": lambda: pipeline.stream(capsys, user_properties, tmp_path / "checkpoint"),
           "verify": lambda: pipeline.verify(capsys, user_properties)}[command]
    code, out, err = run()
    assert code == 3, out + err
    assert err.splitlines()[-1] == f"eosbench: error: {ERRORS[resource_type]} on {_name(access, named)}: {ACLS_HINT}"
    assert pipeline.verified_as_admin().violations == []
