"""The local S3 (conf.local_servers' S3Settings, eosbench.local.s3) and S3A's settings for a checkpoint: rendering, files, and the secret kept out of sight."""

from __future__ import annotations

import argparse
import hashlib
import re
import stat
from pathlib import Path

import pytest
from pydantic import ValidationError

import eosbench.local.s3 as s3
from conf.secrets import HIDDEN, SECRET_KEY_PATTERN, masked
from conf.local_servers import S3A_PROVIDER, S3Settings
from conf.settings import JarBundle, load_jar_bundles
from eosbench.console.errors import BadInput
from eosbench.local.commands import cmd_s3
from eosbench.local.jars import bundle_digest, render_pom

SECRET = "not-to-be-seen-anywhere-0123456789"


def test_server_properties_are_loopback_on_disk_and_signed():
    settings = S3Settings(port=18333)
    text = settings.render_server_properties("EOSBKEY", SECRET)
    lines = dict(line.split("=", 1) for line in text.splitlines())
    assert lines["s3proxy.endpoint"] == "http://127.0.0.1:18333"
    assert lines["s3proxy.authorization"] == "aws-v2-or-v4"
    assert (lines["s3proxy.identity"], lines["s3proxy.credential"]) == ("EOSBKEY", SECRET)
    # On disk, so that restart-s3 keeps the checkpoint (S3Settings.render_server_properties).
    assert lines["jclouds.provider"] == "filesystem"
    assert lines["jclouds.filesystem.basedir"] == str(settings.state_dir / "objects")


def test_s3a_properties_reach_the_server_path_style_over_plain_http_with_fixed_keys():
    props = S3Settings(port=18333).s3a_properties("EOSBKEY", SECRET)
    assert props == {"fs.s3a.endpoint": "http://127.0.0.1:18333", "fs.s3a.path.style.access": "true",
                     "fs.s3a.connection.ssl.enabled": "false", "fs.s3a.endpoint.region": "us-east-1",
                     "fs.s3a.aws.credentials.provider": S3A_PROVIDER, "fs.s3a.access.key": "EOSBKEY",
                     "fs.s3a.secret.key": SECRET, "fs.s3a.multiobjectdelete.enable": "false"}


@pytest.mark.parametrize("bucket", ["Upper", "a", "under_score", "-dash"])
def test_a_bucket_name_s3_would_refuse_is_refused(bucket):
    with pytest.raises(ValidationError):
        S3Settings(bucket=bucket)


def test_config_files_are_private_and_the_shape_file_holds_no_secret(tmp_path: Path):
    server = s3.LocalS3(S3Settings(port=18333, state_dir=tmp_path / "s3"))
    server._write_config()
    access_key, secret_key = server.credentials()
    for private in (server.settings.credentials_file, tmp_path / "s3" / "s3proxy.properties"):
        assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "s3").stat().st_mode) == 0o700
    assert secret_key not in (tmp_path / "s3" / "s3.json").read_text()
    server._write_config()
    assert server.credentials() == (access_key, secret_key), "a restart keeps the keys its clients hold"


def test_signature_v2_matches_awss_documented_example():
    # The GET example of AWS's "Signing and authenticating REST requests" (signature version 2).
    assert s3.sign_v2("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "GET", "/awsexamplebucket1/photos/puppy.jpg",
                      "Tue, 27 Mar 2007 19:36:42 +0000") == "qgk2+6Sv9/oM7G3qLEjTH1a1l1g="


def test_s3a_config_becomes_spark_hadoop_settings_that_spark_and_eosbench_hide(tmp_path: Path):
    config = tmp_path / "s3a.properties"
    config.write_text(s3.render_properties(S3Settings().s3a_properties("EOSBKEY", SECRET)))
    conf = s3.s3a_session_conf(config)
    assert conf["spark.hadoop.fs.s3a.secret.key"] == SECRET and conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    # spark.redaction.regex (streaming/session.py) hides them on the UI and in the event log.
    hidden_by_spark = {key for key in conf if re.search(SECRET_KEY_PATTERN, key)}
    assert hidden_by_spark == {"spark.hadoop.fs.s3a.secret.key", "spark.hadoop.fs.s3a.access.key"}
    assert SECRET not in str(masked(conf)) and masked(conf)["spark.hadoop.fs.s3a.secret.key"] == HIDDEN


def test_a_foreign_key_in_the_s3a_config_is_refused_by_name_only(tmp_path: Path):
    config = tmp_path / "s3a.properties"
    config.write_text(f"fs.s3a.secret.key={SECRET}\nspark.master={SECRET}\n")
    with pytest.raises(BadInput) as refused:
        s3.s3a_session_conf(config)
    assert "spark.master" in str(refused.value) and SECRET not in str(refused.value)


def test_only_an_s3a_checkpoint_brings_jars_and_settings(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("EOSBENCH_HOME", str(tmp_path / "home"))  # no local S3's file to fall back on
    assert s3.s3a_checkpoint_session("file:///tmp/cp", None) == ([], {})
    with pytest.raises(BadInput, match="--s3a-config is for an s3a:// checkpoint"):
        s3.s3a_checkpoint_session("hdfs://127.0.0.1:8020/cp", tmp_path / "s3a.properties")
    monkeypatch.setattr(s3, "resolve_bundle", lambda name: [Path(f"/jars/{name}.jar")])
    # S3A's defaults would reach for AWS: without settings an s3a:// checkpoint is refused.
    with pytest.raises(BadInput, match="needs --s3a-config FILE"):
        s3.s3a_checkpoint_session("s3a://bucket/cp", None)
    config = tmp_path / "s3a.properties"
    config.write_text("fs.s3a.endpoint=http://127.0.0.1:18333\n")
    # The object store's checkpoint file manager comes with the jars that hold it.
    assert s3.s3a_checkpoint_session("s3a://bucket/cp", config) == (
        [Path("/jars/s3a.jar")], {"spark.sql.streaming.checkpointFileManagerClass": "eosbench.spark.ObjectStoreCheckpointFileManager",
                                  "spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:18333"})
    local = s3.LocalS3(S3Settings())  # under EOSBENCH_HOME: the local server's file is the default
    local._write_config()
    assert s3.s3a_checkpoint_session("s3a://bucket/cp", None)[1]["spark.hadoop.fs.s3a.endpoint"] == \
        "http://127.0.0.1:9333"


def test_start_and_status_print_where_but_never_the_secret(tmp_path: Path, monkeypatch, capsys):
    state = tmp_path / "s3"
    server = s3.LocalS3(S3Settings(port=18333, state_dir=state))
    server._write_config()
    secret_key = server.credentials()[1]
    monkeypatch.setattr(s3.LocalS3, "start", lambda self, fresh=False: 1.0)
    monkeypatch.setattr(s3.LocalS3, "status", lambda self: s3.S3Status(4242, True, True))
    assert cmd_s3(argparse.Namespace(s3_command="start", port=18333, heap_mb=256, bucket="eosbench",
                                     s3_state_dir=state, fresh=False)) == 0
    assert cmd_s3(argparse.Namespace(s3_command="status", s3_state_dir=state)) == 0
    printed = capsys.readouterr()
    assert printed.out.splitlines()[:3] == ["endpoint: http://127.0.0.1:18333", "bucket: s3a://eosbench",
                                            f"s3a-config: {state / 's3a.properties'}"]
    assert "s3: running" in printed.out
    assert secret_key not in printed.out + printed.err


def test_status_of_a_server_whose_bucket_does_not_answer_fails(tmp_path: Path, monkeypatch, capsys):
    state = tmp_path / "s3"
    s3.LocalS3(S3Settings(port=18333, state_dir=state))._write_config()
    monkeypatch.setattr(s3.LocalS3, "status", lambda self: s3.S3Status(None, False, False))
    assert cmd_s3(argparse.Namespace(s3_command="status", s3_state_dir=state)) == 1
    assert capsys.readouterr().out == "s3proxy\tdown\tpid -\t127.0.0.1:18333\ns3: stopped\n"


def test_the_s3a_bundle_leaves_out_the_whole_sdk_and_others_keep_their_cache_folders():
    bundle = load_jar_bundles()["s3a"]
    assert bundle.excluded == ("software.amazon.awssdk:bundle",)
    assert "<exclusion><groupId>software.amazon.awssdk</groupId><artifactId>bundle</artifactId></exclusion>" \
        in render_pom(bundle)
    plain = JarBundle(name="x", about="x", artifacts=("g:a:1",))
    assert "<exclusions>" not in render_pom(plain)
    # A bundle without exclusions digests as before the field (and `services`) existed, so its cached jars stay valid.
    before = hashlib.sha256(plain.model_dump_json(exclude={"java_sources", "excluded", "services"}).encode()).hexdigest()[:12]
    assert bundle_digest(plain) == before
