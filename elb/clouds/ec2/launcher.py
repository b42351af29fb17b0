"""Starting one instance per node: ``RunInstances`` over the node's choices in order, or one
``CreateFleet`` per market, and what makes it safe to retry.

A live worker of the node's name is adopted, never started twice. Capacity errors move on to the
next instance type / subnet and avoid the failed choice for ``capacity_backoff`` seconds; a
request whose token launched nothing is never sent again by this process; an answer lost to a
passing fault is looked up by tag before the request is sent again with the same token.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError

from elb.clouds.ec2.context import Ec2Context
from elb.clouds.ec2.errors import CAPACITY_CODES, TRANSIENT_CODES, error_code, to_cloud_error
from elb.clouds.ec2.instances import GONE_STATES, Instances
from elb.clouds.ec2.launch_requests import (
    Choice,
    LaunchSpec,
    Market,
    choices,
    fleet_arguments,
    fleet_choice,
    run_arguments,
    uses_fleet,
    worker_tags,
)
from elb.clouds.ec2.lifecycle import terminate_quietly
from elb.clouds.ec2.node_config import NodeConfig
from elb.core.interfaces import CloudError, NodeBoot

if TYPE_CHECKING:
    from mypy_boto3_ec2.type_defs import InstanceTypeDef, RunInstancesRequestTypeDef, TagTypeDef

log = logging.getLogger(__name__)

_Request = TypeVar("_Request", bound=Mapping[str, Any])

_MAX_TOKEN_GENERATIONS = 4
_MAX_SEND_ATTEMPTS = 2  # a launch request is sent with one token (botocore retries inside each)
_NO_FRESH_REQUEST = "no fresh ClientToken: EC2 answered each with an ended instance or another request"


class _Fatal(Exception):
    """Stop launching: every further attempt would fail the same way."""

    def __init__(self, error: CloudError) -> None:
        super().__init__(str(error))
        self.error = error


class _NoCapacity(Exception):
    """Every choice for one node failed with a capacity error or is backed off."""


@dataclass(slots=True)
class Starts:
    """What starting a launch's nodes came to: the instances started (name -> id), the fleet
    nodes' volume tags (``worker_tags``), the nodes failed (name -> why), and the names not started."""

    started: dict[str, str] = field(default_factory=dict)
    volume_tags: dict[str, list[TagTypeDef]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    not_started: tuple[str, ...] = ()
    throttled: set[str] = field(default_factory=set)  # of ``failed``: refused for the request rate


def group_of(groups: Mapping[str, str] | None, name: str) -> str | None:
    """The node group ``groups`` gives ``name`` (None: the default group)."""
    return None if groups is None else groups.get(name)


class Launcher:
    """Starts the instances of a launch's nodes, one node after the other, and remembers what
    failed: the choices backed off (until when, clock seconds) and the tokens spent."""

    def __init__(self, ctx: Ec2Context, instances: Instances, node_config: NodeConfig) -> None:
        self.ctx = ctx
        self.instances = instances
        self.node_config = node_config
        self.backoff: dict[Choice, float] = {}  # choice -> avoid until (clock seconds)
        # Tokens whose request launched nothing (a capacity error; a fleet of errors only, which
        # EC2 would answer again as it did): never sent again by this process.
        self._spent: set[str] = set()

    def backed_off(self, choice: Choice) -> bool:
        """Whether ``choice`` failed for capacity less than ``capacity_backoff`` seconds ago."""
        until = self.backoff.get(choice)
        return until is not None and self.ctx.clock() < until

    def start_all(
        self,
        names: Sequence[str],
        groups: Mapping[str, str] | None,
        specs: Mapping[str | None, LaunchSpec],
        boot: Mapping[str, NodeBoot] | None,
        stopping: threading.Event | None,
    ) -> Starts:
        """Start each node in turn (a retry after a crash adopts its live instance, never starts
        a second); until ``stopping`` is set, the names left then not started. A node with no
        capacity fails alone; a permission or configuration error raises when nothing started,
        else fails the rest."""
        existing, ended = self.instances.lives_by_names(names)  # a retry after a crash: adopt, don't start twice
        out = Starts()
        for i, name in enumerate(names):
            if stopping is not None and stopping.is_set():
                out.not_started = tuple(names[i:])
                break
            try:
                spec = specs[group_of(groups, name)]
                spec = self.node_config.with_node_config(
                    name, spec, adopting=name in existing, boot=(boot or {}).get(name)
                )
                inst = self.start_one(name, spec, existing.get(name), ended.get(name, ""))
            except _NoCapacity as err:
                out.failed[name] = str(err)
                continue
            except (_Fatal, CloudError) as err:
                error = err.error if isinstance(err, _Fatal) else err
                if not out.started:
                    raise error from None
                for rest in names[i:]:
                    out.failed[rest] = str(error)
                if error.throttled:
                    out.throttled.update(names[i:])
                break
            out.started[name] = inst["InstanceId"]
            if uses_fleet(spec):
                out.volume_tags[name] = worker_tags(spec, self.ctx.cluster, name)
        return out

    def start_one(self, name: str, spec: LaunchSpec, found: InstanceTypeDef | None, after: str) -> InstanceTypeDef:
        """Start the instance of one node, or adopt ``found``. ``after``: the newest ended
        instance of the name (``client_token``). Raises _NoCapacity or _Fatal."""
        if found is not None:
            log.info("%s: adopting %s, already %s", name, found.get("InstanceId"), found["State"]["Name"])
            return found
        if uses_fleet(spec):
            return self._start_by_fleet(name, spec, after)
        tried: list[str] = []
        for choice in choices(spec):
            if self.backed_off(choice):
                tried.append(f"{choice.describe()}: backed off")
                continue
            for args in self._fresh(
                functools.partial(run_arguments, spec, choice, self.ctx.cluster, name, after=after)
            ):
                try:
                    answer, inst = self._send(name, "RunInstances", functools.partial(self._run, args))
                except ClientError as err:
                    code = error_code(err)
                    if code == "IdempotentParameterMismatch":  # the token was used for another request
                        continue
                    if code not in CAPACITY_CODES:
                        raise _Fatal(to_cloud_error(err, f"launching {name}")) from None
                    self._spent.add(args["ClientToken"])
                    self._backoff_choice(name, choice, code)
                    tried.append(f"{choice.describe()}: {code}")
                    break
                inst = inst if inst is not None else answer
                if inst.get("State", {}).get("Name") in GONE_STATES:
                    # The token belonged to an earlier life of this name: use the next generation.
                    log.info("%s: token of ended %s, retrying with a new one", name, inst.get("InstanceId"))
                    continue
                log.info("%s: launched %s (%s)", name, inst.get("InstanceId"), choice.describe())
                return inst
            else:
                raise _Fatal(CloudError(f"launching {name}: {_NO_FRESH_REQUEST}"))
        raise _NoCapacity("no capacity: " + "; ".join(tried))

    def _fresh(self, build: Callable[..., _Request]) -> Iterator[_Request]:
        """The requests ``build(generation=0, 1, ...)`` whose tokens this process has not spent,
        at most ``_MAX_TOKEN_GENERATIONS`` of them (``client_token``)."""
        generation = sent = 0
        while sent < _MAX_TOKEN_GENERATIONS:
            args = build(generation=generation)
            generation += 1
            if args["ClientToken"] not in self._spent:
                sent += 1
                yield args

    def _backoff_choice(self, name: str, choice: Choice, code: str) -> None:
        self.backoff[choice] = self.ctx.clock() + self.ctx.config.capacity_backoff
        log.warning("%s: %s: %s; avoiding it for %gs", name, choice.describe(), code, self.ctx.config.capacity_backoff)

    def _start_by_fleet(self, name: str, spec: LaunchSpec, after: str) -> InstanceTypeDef:
        """One ``CreateFleet`` (instant) per market, spot first when asked: EC2 picks among the
        types and subnets not backed off. Overrides that failed for capacity are backed off
        like ``RunInstances`` choices. Raises _NoCapacity or _Fatal."""
        tried: list[str] = []
        for market in dict.fromkeys(c.market for c in choices(spec)):
            options = [c for c in choices(spec) if c.market == market and not self.backed_off(c)]
            tried += [f"{c.describe()}: backed off" for c in choices(spec) if c.market == market and self.backed_off(c)]
            if not options:
                continue
            for args in self._fresh(
                functools.partial(fleet_arguments, spec, options, self.ctx.cluster, name, after=after)
            ):
                outcome = self._fleet_once(name, market, args, tried)
                if outcome == "no capacity":
                    self._spent.add(args["ClientToken"])
                    break
                if outcome != "again":
                    return outcome
            else:
                raise _Fatal(CloudError(f"launching {name}: {_NO_FRESH_REQUEST}"))
        raise _NoCapacity("no capacity: " + "; ".join(tried))

    def _fleet_once(
        self, name: str, market: Market, args: Mapping[str, Any], tried: list[str]
    ) -> InstanceTypeDef | Literal["again", "no capacity"]:
        """Send one ``CreateFleet``: the node's instance, ``"again"`` when EC2 answered the token
        with an ended instance or another request (a new token is needed), ``"no capacity"``
        (noted in ``tried``, capacity errors backed off). Raises _Fatal."""
        doing = f"launching {name} (CreateFleet)"
        try:
            resp, found = self._send(name, "CreateFleet", functools.partial(self.ctx.client.create_fleet, **args))
        except ClientError as err:
            code = error_code(err)
            if code == "IdempotentParameterMismatch":
                return "again"
            if code not in CAPACITY_CODES:
                raise _Fatal(to_cloud_error(err, doing)) from None
            tried.append(f"{market} fleet: {code}")
            return "no capacity"
        if found is not None:
            return found
        ids = [i for entry in resp.get("Instances", []) for i in entry.get("InstanceIds", [])]
        self._note_fleet_errors(resp.get("Errors", []), market, tried, fatal=None if ids else doing)
        if not ids:
            return "no capacity"
        return self._fleet_instance(name, market, ids)

    def _note_fleet_errors(
        self, errors: Sequence[Mapping[str, Any]], market: Market, tried: list[str], *, fatal: str | None
    ) -> None:
        """A fleet's errors noted in ``tried``, each capacity error's choice backed off; with
        ``fatal`` (what was being done, when no instance started), any other error raises _Fatal."""
        for e in errors:
            code = str(e.get("ErrorCode", ""))
            choice = fleet_choice(e, market)
            what = choice.describe() if choice is not None else f"{market} fleet"
            tried.append(f"{what}: {code}")
            if code in CAPACITY_CODES and choice is not None:
                self.backoff[choice] = self.ctx.clock() + self.ctx.config.capacity_backoff
            elif code not in CAPACITY_CODES and fatal is not None:
                raise _Fatal(CloudError(f"{fatal}: {code}: {e.get('ErrorMessage', '')}"))

    def _fleet_instance(self, name: str, market: Market, ids: list[str]) -> InstanceTypeDef | Literal["again"]:
        """The node's instance among those a fleet started (a second one terminated), or
        ``"again"`` when all of them had ended (the token was an earlier life's). Raises _Fatal
        (the instances terminated) when they cannot be listed."""
        try:
            now = {r.get("InstanceId"): r for r in self.instances.poll(ids)}
        except CloudError as err:
            terminate_quietly(self.ctx.client, ids)
            raise _Fatal(err) from None
        # Not listed yet (eventual consistency): taken as just started.
        live = [i for i in ids if now.get(i, {}).get("State", {}).get("Name") not in GONE_STATES]
        if not live:
            # The token belonged to an earlier life of this name: use the next generation.
            log.info("%s: token of ended %s, retrying with a new one", name, ", ".join(ids))
            return "again"
        if len(live) > 1:  # one node, one instance: never keep a second one billing
            terminate_quietly(self.ctx.client, live[1:])
        log.info("%s: launched %s by CreateFleet (%s)", name, live[0], market)
        return now.get(live[0]) or {"InstanceId": live[0], "State": {"Code": 0, "Name": "pending"}}

    def _send(self, name: str, operation: str, call: Callable[[], Any]) -> tuple[Any, InstanceTypeDef | None]:
        """Send a launch request with one token: ``(answer, None)``; a lost answer is looked up
        by tag before sending again: ``(None, the instance found)``."""
        last: Exception | None = None
        for _ in range(_MAX_SEND_ATTEMPTS):
            try:
                return call(), None
            except ClientError as err:
                if error_code(err) not in TRANSIENT_CODES:
                    raise
                last = err
            except BotoCoreError as err:
                if not isinstance(err, BotoConnectionError | HTTPClientError):
                    raise _Fatal(to_cloud_error(err, f"launching {name}")) from None
                last = err
            log.warning("%s: %s failed (%s); checking whether it started anyway", name, operation, last)
            try:
                found = self.instances.live_by_name(name)
            except CloudError as err:
                # Cannot look: sending again with the same ClientToken is still safe.
                log.warning("%s: %s", name, err)
                found = None
            if found is not None:
                return None, found
        assert last is not None
        raise _Fatal(to_cloud_error(last, f"launching {name}"))

    def _run(self, args: RunInstancesRequestTypeDef) -> InstanceTypeDef:
        resp = self.ctx.client.run_instances(**args)
        insts = resp.get("Instances", [])
        if len(insts) != 1:
            raise CloudError(f"RunInstances returned {len(insts)} instances for one node")
        return insts[0]
