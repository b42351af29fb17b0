"""Loading the config file: every hole a bad file could slip through is an error, in one line
that names the file, the place and the key, and never echoes the file's content."""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel, PlainValidator

import elb.core.config
from elb.cli.main import main
from elb.clouds.ec2.config import ec2_settings
from elb.core.config import Config, ConfigError, load_config
from elb.core.exitcodes import Exit
from tests.unit.shipped import shipped_sections


def write(tmp_path: Path, text: str | bytes, name: str = "elb.yml") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def fields_of(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], object]]:
    """Every leaf option of the model: (key path, annotation without None)."""
    for name, field in model.model_fields.items():
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            yield from fields_of(kind, (*prefix, name))
            continue
        if typing.get_origin(kind) in (typing.Union, types.UnionType):
            kinds = [a for a in typing.get_args(kind) if a is not type(None)]
            kind = kinds[0] if len(kinds) == 1 else kind
        if typing.get_origin(kind) is typing.Annotated:
            kind = typing.get_args(kind)[0]
        yield (*prefix, name), kind


def nested(path: tuple[str, ...], value: str) -> str:
    """YAML text setting ``path`` to ``value`` (written as YAML)."""
    lines = [f"{'  ' * i}{key}:" for i, key in enumerate(path[:-1])]
    lines.append(f"{'  ' * (len(path) - 1)}{path[-1]}: {value}")
    return "\n".join(lines) + "\n"


def durations_of(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every time option (``elb.core.durations``: seconds, or text with a unit)."""
    for name, field in model.model_fields.items():
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            yield from durations_of(kind, (*prefix, name))
        elif any(isinstance(m, PlainValidator) for m in field.metadata):
            yield (*prefix, name)


# Every option: the config's own, and each shipped scheduler's and cloud's section at its key.
OPTIONS = [*fields_of(Config), *(o for path, model in shipped_sections() for o in fields_of(model, path))]
FLOATS = [p for p, kind in OPTIONS if kind is float]
DURATIONS = [*durations_of(Config), *(d for path, model in shipped_sections() for d in durations_of(model, path))]
INTS = [p for p, kind in OPTIONS if kind is int]
BOOLS = [p for p, kind in OPTIONS if kind is bool]


def test_the_walk_finds_every_kind_of_number() -> None:
    assert ("poll_interval",) in FLOATS and ("sge", "timeout") in FLOATS and ("policy", "idle_factor") in FLOATS
    assert (
        ("policy", "max_nodes") in INTS and ("metrics_port",) in INTS and ("cloud", "ec2", "root_volume_size") in INTS
    )
    assert ("cloud", "ec2", "spot") in BOOLS
    assert len(FLOATS) >= 18 and len(INTS) >= 8
    assert ("poll_interval",) in DURATIONS and ("policy", "idle_factor") not in DURATIONS and len(DURATIONS) >= 18


@pytest.mark.parametrize("path", FLOATS, ids=".".join)
@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan", "1e400", "true", "'60'"])
def test_every_number_option_is_a_finite_number(tmp_path: Path, path: tuple[str, ...], value: str) -> None:
    cfg = write(tmp_path, nested(path, value))
    if value == "'60'" and path in DURATIONS:  # a time may be text: "60", "60s", "1m"
        return
    with pytest.raises(ConfigError, match=rf"line {len(path)}, column {2 * len(path) - 1}: {'.'.join(path)}: "):
        load_config(cfg)


@pytest.mark.parametrize("path", FLOATS, ids=".".join)
def test_no_time_is_negative(tmp_path: Path, path: tuple[str, ...]) -> None:
    never = "(Input should be greater than|not a duration \\(never negative\\))"
    with pytest.raises(ConfigError, match=rf"{'.'.join(path)}: {never}"):
        load_config(write(tmp_path, nested(path, "-1")))


@pytest.mark.parametrize(
    "path",
    [("poll_interval",), ("sge", "timeout"), ("policy", "billing_period"), ("policy", "boot_time")],
    ids=".".join,
)
def test_times_that_must_pass_are_positive(tmp_path: Path, path: tuple[str, ...]) -> None:
    with pytest.raises(ConfigError, match=rf"{'.'.join(path)}: (at least 1 s|more than 0 s)"):
        load_config(write(tmp_path, nested(path, "0")))


def test_times_have_a_sane_ceiling(tmp_path: Path) -> None:
    # poll_interval: 1e12 is finite but overflows the scheduler's datetime arithmetic
    with pytest.raises(ConfigError, match=r"poll_interval: at most a year \(31536000 s\)"):
        load_config(write(tmp_path, "poll_interval: 1.0e+12\n"))


def test_zero_where_zero_means_something(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, "provision: {timeout: 0}\npolicy: {launch_delay: 0, idle_factor: 0}\n"))
    assert cfg.provision.timeout == 0 and cfg.policy.launch_delay == 0 and cfg.policy.idle_factor == 0


@pytest.mark.parametrize("path", INTS, ids=".".join)
@pytest.mark.parametrize("value", ["true", "false", "2.0", "2.5", "'2'"])
def test_every_integer_option_wants_an_integer(tmp_path: Path, path: tuple[str, ...], value: str) -> None:
    with pytest.raises(ConfigError, match=rf"{'.'.join(path)}: Input should be a valid integer"):
        load_config(write(tmp_path, nested(path, value)))


@pytest.mark.parametrize("path", BOOLS, ids=".".join)
@pytest.mark.parametrize("value", ["1", "0", "'yes'", "'true'"])
def test_every_boolean_option_wants_a_boolean(tmp_path: Path, path: tuple[str, ...], value: str) -> None:
    with pytest.raises(ConfigError, match=rf"{'.'.join(path)}: Input should be a valid boolean"):
        load_config(write(tmp_path, nested(path, value)))


def test_integers_are_numbers_and_true_is_a_boolean(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, "poll_interval: 30\ncloud: {ec2: {spot: true}}\npolicy: {max_nodes: 4}\n"))
    assert cfg.poll_interval == 30.0 and ec2_settings(cfg).spot is True and cfg.policy.max_nodes == 4


def test_a_duplicate_key_names_the_key_and_both_lines(tmp_path: Path) -> None:
    path = write(tmp_path, "policy:\n  max_nodes: 3\n  boot_time: 60\n  max_nodes: 40\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value) == f"config {path}: line 4, column 3: duplicate key 'max_nodes' (first at line 2)"


def test_a_duplicate_top_level_key_is_an_error_too(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"line 3, column 1: duplicate key 'poll_interval' \(first at line 1\)"):
        load_config(write(tmp_path, "poll_interval: 30\nstate_dir: /tmp\npoll_interval: 60\n"))


def test_an_alias_bomb_is_refused_where_it_starts(tmp_path: Path) -> None:
    lines = ["provision:", "  extra_vars:", "    a0: [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, 7):  # 10**6 strings once expanded (the real bomb goes to 10**9)
        lines.append(f"    a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    lines[2] = lines[2].replace("a0: [", "a0: &a0 [")
    with pytest.raises(ConfigError, match=r"line 4, column 14: aliases \(\*name\) are not allowed"):
        load_config(write(tmp_path, "\n".join(lines) + "\n"))


def test_a_merge_key_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"line 2, column 3: merge keys"):
        load_config(write(tmp_path, "policy:\n  <<: {max_nodes: 4}\n"))


def test_no_file_is_an_error_naming_the_file_looked_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    default = tmp_path / "etc" / "elb.yml"
    monkeypatch.setattr(elb.core.config, "DEFAULT_CONFIG_PATH", default)
    with pytest.raises(ConfigError, match=rf"^config {default}: no such file"):
        load_config(None)
    with pytest.raises(ConfigError, match=rf"^config {tmp_path / 'x.yml'}: no such file"):
        load_config(tmp_path / "x.yml")


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "{}\n", "---\n...\n"])
def test_an_empty_file_is_an_error_that_gives_the_minimum(tmp_path: Path, text: str) -> None:
    with pytest.raises(ConfigError, match=r"the file is empty; a config has at least one key, e.g. 'cloud: "):
        load_config(write(tmp_path, text))


def test_the_minimum_config_given_is_a_config(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, elb.core.config.MINIMUM_CONFIG + "\n")).cloud.provider == "ec2"


def test_a_directory_is_not_a_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=rf"^config {tmp_path}: is a directory"):
        load_config(tmp_path)


def test_a_file_that_is_not_utf8_gives_its_place(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"line 2, column 9: not UTF-8 text$"):
        load_config(write(tmp_path, b"cluster:\n  name: \xff\xfeabc\n"))


def test_a_huge_file_is_not_read_whole(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="larger than 1048576 bytes"):
        load_config(write(tmp_path, "# x\n" * 300_000))


SECRET = "hunter2-s3cr3t"


@pytest.mark.parametrize(
    ("text", "place"),
    [
        (f'provision:\n  extra_vars: {{password: "{SECRET}\n', "line 3, column 1"),
        (f"provision:\n  extra_vars:\n    password: {SECRET}\n   bad: [\n", "line 4, column 4"),
        (f"provision:\n  extra_vars:\n\t password: {SECRET}\n", "line 3, column 1"),
        (f"provision:\n  extra_vars: {{password: !!python/object {SECRET}}}\n", "line 2, column 26"),
        (f"provision:\n  extra_vars: {{password: {SECRET}\x07}}\n", "line 2, column 40"),
    ],
)
def test_a_syntax_error_gives_the_place_and_kind_never_the_content(tmp_path: Path, text: str, place: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    message = str(err.value)
    assert message.startswith(f"config {path}: {place}: "), message
    assert SECRET not in message and "password" not in message
    assert "\n" not in message


def test_a_bad_value_gives_its_line_and_no_value(tmp_path: Path) -> None:
    path = write(tmp_path, "cloud:\n  ec2:\n    extra_tags: {owner: [s3cr3t]}\npolicy:\n  billing: monthly\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    message = str(err.value)
    assert "line 3, column 18: cloud.ec2.extra_tags.owner: Input should be a valid string" in message
    assert "line 5, column 3: policy.billing: Input should be 'hour' or 'second'" in message
    assert "s3cr3t" not in message and "monthly" not in message


def test_dates_stay_text_and_binary_is_refused(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, "provision:\n  extra_vars: {since: 2024-01-31}\n"))
    assert cfg.provision.extra_vars == {"since": "2024-01-31"}
    with pytest.raises(ConfigError, match=r"line 2, column 19: values tagged !!binary are not allowed"):
        load_config(write(tmp_path, "provision:\n  extra_vars: {k: !!binary aGVsbG8=}\n"))


def test_deep_nesting_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="nested deeper than 64 levels"):
        load_config(write(tmp_path, "provision: {extra_vars: {x: " + "[" * 5000 + "\n"))


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("state_dir: {blocker}\n", "line 1, column 1: state_dir: .* exists and is not a directory"),
        ("state_dir: {blocker}/sub\n", "state_dir: .* cannot be created: a parent is not a directory"),
        ("cloud: {{provider: local}}\nprovision:\n  private_data_dir: {blocker}\n", "provision.private_data_dir"),
        ("provision:\n  host_keys_dir: {blocker}\n", "line 2, column 3: provision.host_keys_dir: .* not a directory"),
        ("stats_file: {dir}\n", "line 1, column 1: stats_file: .* is a directory"),
    ],
)
def test_paths_elb_cannot_use_are_config_errors(tmp_path: Path, text: str, key: str) -> None:
    blocker = write(tmp_path, "a file", "blocker")
    path = write(tmp_path, text.format(blocker=blocker, dir=tmp_path))
    with pytest.raises(ConfigError, match=key):
        load_config(path)


def test_cli_run_once_status_without_a_config_exit_3_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    default = tmp_path / "etc" / "elb.yml"
    monkeypatch.setattr(elb.core.config, "DEFAULT_CONFIG_PATH", default)
    for argv in (["run"], ["once"], ["once", "--dry-run"], ["status"], ["validate"], ["plot"]):
        assert main(argv) == Exit.CONFIG, argv
        err = capsys.readouterr().err
        assert err == f"elb: config {default}: no such file (elb needs a config file; give another with --config)\n"


def test_cli_config_errors_are_one_line_and_exit_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = write(tmp_path, "x", "blocker")
    bad = {
        "inf": "poll_interval: .inf\n",
        "nan": "sge: {timeout: .nan}\n",
        "dup": "policy: {max_nodes: 1}\npolicy: {max_nodes: 2}\n",
        "bool": "policy: {max_nodes: true}\n",
        "empty": "",
        "state": f"state_dir: {blocker}\n",
        "syntax": "a: [\n",
        "bomb": "a: &a [1]\nb: [*a, *a]\n",
    }
    for name, text in bad.items():
        path = write(tmp_path, text, f"{name}.yml")
        for argv in (["validate"], ["run"], ["once"], ["once", "--dry-run"], ["status"]):
            assert main([*argv, "--config", str(path)]) == Exit.CONFIG, (name, argv)
            err = capsys.readouterr().err
            assert err.startswith(f"elb: config {path}: ") and err.count("\n") == 1, (name, err)
    write(tmp_path, b"\xff", "bin.yml")
    assert main(["validate", "-c", str(tmp_path / "bin.yml")]) == Exit.CONFIG


def test_validate_prints_the_file_it_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(
        tmp_path,
        f"policy: {{max_nodes: 4}}\ncloud: {{provider: local}}\nstate_dir: {tmp_path / 's'}\n"
        f"provision: {{private_data_dir: {tmp_path / 'ansible'}}}\n",
    )
    assert main(["validate", "--offline", "-c", str(path)]) == Exit.OK
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"config: {path.resolve()}"
    assert out[1] == "ok   config: policy elb, 0-4 nodes, scheduler sge, provider local, master master"
    assert out[2].startswith("ok   playbooks: ")


def test_validate_checks_extra_vars_names_as_run_does(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(
        tmp_path,
        f"state_dir: {tmp_path / 's'}\n"
        f"provision: {{extra_vars: {{bad-name: 1}}, private_data_dir: {tmp_path / 'a'}}}\n",
    )
    assert main(["validate", "--offline", "-c", str(path)]) == Exit.CONFIG
    assert "'bad-name' is not a valid Ansible variable name" in capsys.readouterr().out


def test_a_bad_command_line_exits_2() -> None:
    with pytest.raises(SystemExit) as err:
        main(["once", "--no-such-flag"])
    assert err.value.code == Exit.USAGE
