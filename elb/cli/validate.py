"""``elb validate``: what a first run needs, one line a check (ok or FAIL, and how to fix it).

Each check is a function of the config returning ``Check``; ``run_checks`` runs them in order.
Nothing is created: the state directory is probed with a temporary file only when it exists
(else the nearest existing parent is checked for write access and what is missing is said).
``offline`` skips the checks that need the network: SGE's qmaster and the cloud.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from elb.core import assets
from elb.core.checks import Check
from elb.core.config import Config
from elb.core.durations import minutes
from elb.provision.ansible import AnsibleProvisioner, ProvisionError
from elb.service import factory, migrations
from elb.service.journal import Journal, JournalError
from elb.service.sdnotify import hung_after


def check_playbooks(cfg: Config) -> Iterator[Check]:
    problem = factory.playbooks_problem(cfg)
    where = assets.playbook_dir(cfg.provision.playbook_dir)
    if problem is not None:
        yield Check("playbooks", False, problem, "set provision.playbook_dir to a directory with the playbooks")
        return
    yield Check("playbooks", True, str(where))
    try:
        provisioner = factory.make_provisioner(cfg)
    except ProvisionError as err:
        yield Check("provision settings", False, str(err), "fix the provision section")
        return
    if cfg.provision.mode == "boot":
        yield _check_boot(provisioner)


def _check_boot(provisioner: AnsibleProvisioner) -> Check:
    """A node's boot can be made: the master's address for the nodes, the names, the variables."""
    try:
        plan = provisioner.boot_plans(["node-check"])["node-check"]
    except ValueError as err:
        return Check("nodes' boot", False, str(err), "set etc_hosts_master_address in provision.extra_vars")
    runs = " ".join(plan.argv[3:])
    return Check("nodes' boot", True, f"each new node runs {runs} at its first boot (the image must have them)")


def check_ssh_key(cfg: Config) -> Iterator[Check]:
    key = cfg.provision.ssh_private_key
    if key is None:
        yield Check("SSH key", True, "provision.ssh_private_key not set: ssh's own keys and agent are used")
        return
    try:
        with key.open("rb") as f:
            f.read(1)
    except OSError as err:
        why = err.strerror or type(err).__name__
        yield Check("SSH key", False, f"{key}: cannot be read: {why}", f"make {key} readable by the user elb runs as")
        return
    yield Check("SSH key", True, f"{key} is readable")


def check_scheduler(cfg: Config) -> Iterator[Check]:
    """The configured scheduler's own checks (its driver's)."""
    yield from factory.scheduler_checks(cfg)


def _probe(path: Path) -> str | None:
    """Why a file cannot be created in the directory ``path`` (None: it can); the file is deleted."""
    try:
        with tempfile.NamedTemporaryFile(dir=path, prefix=".elb-validate-"):
            return None
    except OSError as err:
        return err.strerror or type(err).__name__


def _dir_check(what: str, key: str, path: Path) -> Check:
    if path.is_dir():
        why = _probe(path)
        if why is not None:
            return Check(what, False, f"{path} is not writable: {why}", f"let the user elb runs as write to {path}")
        return Check(what, True, f"{path} is writable")
    parent = next((p for p in path.parents if p.is_dir()), Path("/"))
    why = _probe(parent)
    if why is None:
        return Check(what, True, f"{path} does not exist yet; elb creates it in {parent} (writable)")
    return Check(
        what,
        False,
        f"{path} does not exist and {parent} is not writable: {why}",
        f"create {path} for the user elb runs as, or set {key}",
    )


def check_state(cfg: Config) -> Iterator[Check]:
    yield _dir_check("state directory", "state_dir", cfg.state_dir)
    yield _dir_check("Ansible directory", "provision.private_data_dir", cfg.provision.private_data_dir)
    if cfg.journal_path.exists():
        try:
            Journal.read_only(cfg.journal_path).close()
        except migrations.JournalVersionError as err:
            yield Check("journal", False, str(err), "run the newer elb")
            return
        except JournalError as err:
            yield Check("journal", False, str(err), f"check the permissions of {cfg.journal_path}")
            return
        yield Check("journal", True, f"{cfg.journal_path} is readable")


# Where ``elb service --install`` and packages put the unit (the first found is checked).
UNIT_PATHS = tuple(
    Path(d) / "elb.service" for d in ("/etc/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system")
)
# Commands a pass may run one after another against a slow scheduler that still answers, each up
# to sge.timeout (slurm.timeout): its reads of the queue and hosts, a second read to confirm, the
# site's complexes and parallel environments, start times. An estimate, for the check below. A
# command tried again after a transient error (``elb.schedulers.process.Retry``) takes at most
# about three time-outs, and a pass ends at its first read that still fails: within the ten.
PASS_COMMANDS = 10
MIN_WATCHDOG = 10.0  # seconds: a keep-alive every WatchdogSec/2 from a thread may come late below this
_SPAN_UNITS = {
    "us": 1e-6, "usec": 1e-6, "ms": 1e-3, "msec": 1e-3, "": 1.0, "s": 1.0, "sec": 1.0, "second": 1.0,
    "seconds": 1.0, "m": 60.0, "min": 60.0, "minute": 60.0, "minutes": 60.0, "h": 3600.0, "hr": 3600.0,
    "hour": 3600.0, "hours": 3600.0, "d": 86400.0, "day": 86400.0, "days": 86400.0, "w": 604800.0,
    "week": 604800.0, "weeks": 604800.0, "M": 2629800.0, "month": 2629800.0, "months": 2629800.0,
    "y": 31557600.0, "year": 31557600.0, "years": 31557600.0,
}  # fmt: skip


def systemd_seconds(text: str) -> float | None:
    """A systemd time span (``600``, ``10min``, ``5m 30s``) in seconds; None for ``infinity``,
    ``ValueError`` for what systemd would not read either (systemd.time(7))."""
    text = text.strip()
    if text == "infinity":
        return None
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    if not text or "".join(f"{n}{u}" for n, u in parts) != re.sub(r"\s+", "", text):
        raise ValueError(f"not a systemd time span: {text!r}")
    try:
        return sum(float(n) * _SPAN_UNITS[u] for n, u in parts)
    except KeyError:
        raise ValueError(f"not a systemd time span: {text!r}") from None


def unit_setting(texts: Sequence[str], key: str) -> str | None:
    """The last ``key=`` of the ``[Service]`` sections of a unit and its drop-ins, in order."""
    found = None
    for text in texts:
        section = ""
        for line in text.splitlines():
            line = line.strip()  # noqa: PLW2901
            if line.startswith("[") and line.endswith("]"):
                section = line
            elif section == "[Service]" and line.startswith(f"{key}="):
                found = line.split("=", 1)[1]
    return found


def _unit_texts(unit: Path) -> list[str] | None:
    """The unit file and its drop-ins (``elb.service.d/*.conf``), or None when it cannot be read."""
    try:
        texts = [unit.read_text(encoding="utf-8")]
        dropins = unit.with_name(unit.name + ".d")
        if dropins.is_dir():
            texts += [p.read_text(encoding="utf-8") for p in sorted(dropins.glob("*.conf"))]
    except (OSError, UnicodeDecodeError):
        return None
    return texts


def check_watchdog(cfg: Config, units: Sequence[Path] = UNIT_PATHS) -> Iterator[Check]:
    """The installed unit's WatchdogSec against this config (a warning, never a failure).

    elb sends keep-alives every WatchdogSec/2 from a thread of its own, whatever the poll
    interval, and stops them once no pass has started for ``hung_after`` (three poll intervals,
    or WatchdogSec when longer): a pass that takes longer than that gets elb restarted. A pass
    against a slow scheduler may run about ``PASS_COMMANDS`` commands one after another, each up
    to its time-out; the next starts up to a poll interval later.
    """
    unit = next((u for u in units if u.is_file()), None)
    if unit is None:
        yield Check("watchdog", True, "no elb.service installed: not checked")
        return
    texts = _unit_texts(unit)
    if texts is None:
        yield Check("watchdog", True, f"{unit} cannot be read: not checked")
        return
    value = unit_setting(texts, "WatchdogSec")
    try:
        watchdog = systemd_seconds(value) if value is not None else 0.0
    except ValueError as err:
        yield Check("watchdog", False, f"{unit}: WatchdogSec: {err}", "write seconds (600) or a span (10min)")
        return
    if not watchdog:
        yield Check("watchdog", True, f"{unit}: no WatchdogSec: a hung elb is not restarted", "", warning=True)
        return
    timeout, key = factory.scheduler_timeout(cfg)
    hung = hung_after(cfg.poll_interval, watchdog)
    slow = PASS_COMMANDS * timeout + cfg.poll_interval
    where = f"{unit}: WatchdogSec {watchdog:g} s"
    if watchdog < MIN_WATCHDOG:
        yield Check(
            "watchdog",
            True,
            f"{where}: keep-alives every {watchdog / 2:g} s may come late on a busy master",
            f"set WatchdogSec to at least {MIN_WATCHDOG:g} s",
            warning=True,
        )
    elif slow >= hung:
        yield Check(
            "watchdog",
            True,
            f"{where}: a pass against a slow scheduler ({PASS_COMMANDS} commands of up to {key} {timeout:g} s, "
            f"then poll_interval {cfg.poll_interval:g} s) may take {minutes(slow)}, and elb is restarted as hung "
            f"after {minutes(hung)}",
            f"set WatchdogSec to at least {slow:.0f} s (or lower {key})",
            warning=True,
        )
    else:
        yield Check(
            "watchdog",
            True,
            f"{where}: keep-alives every {watchdog / 2:g} s; a pass that hangs gets elb restarted within "
            f"{minutes(hung + watchdog)}",
        )


def check_cloud(cfg: Config) -> Iterator[Check]:
    """The configured cloud's own checks (its adapter's)."""
    yield from factory.cloud_checks(cfg)


LOCAL_CHECKS: tuple[Callable[[Config], Iterator[Check]], ...] = (
    check_playbooks,
    check_ssh_key,
    check_state,
    check_watchdog,
)
NETWORK_CHECKS: tuple[Callable[[Config], Iterator[Check]], ...] = (check_scheduler, check_cloud)


def run_checks(cfg: Config, *, offline: bool = False) -> Iterator[Check]:
    for check in LOCAL_CHECKS if offline else LOCAL_CHECKS + NETWORK_CHECKS:
        yield from check(cfg)
