"""The life of the cluster's workers after their launch: terminate them, stop them into a warm
pool and start them again (``TerminateInstances``, ``StopInstances``, ``StartInstances``), and wait
until instances reach a state (``DescribeInstances`` by id).

Each call names its instances by id, and every id must be an elb-managed worker of this cluster
(``Instances.owned``), else nothing is done.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from elb.clouds.ec2.context import Ec2Context
from elb.clouds.ec2.errors import CAPACITY_CODES, error_code, to_cloud_error
from elb.clouds.ec2.instances import GONE_STATES, Instances
from elb.clouds.ec2.tags import tag_volumes, tags_of
from elb.core.interfaces import TAG_NAME, CloudError, Instance, LaunchResult

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_ec2.type_defs import TagTypeDef

log = logging.getLogger(__name__)

TERMINATE_BATCH = 1000  # instance ids per TerminateInstances call (EC2 takes at most 1000)


def _start_stop_error(err: Exception, doing: str) -> CloudError:
    """A StartInstances or StopInstances failure: retryable also when EC2 has no capacity to
    start it now, or the instance is between states (IncorrectInstanceState)."""
    out = to_cloud_error(err, doing)
    if isinstance(err, ClientError) and error_code(err) in (*CAPACITY_CODES, "IncorrectInstanceState"):
        out.retryable = True
    return out


def terminate_quietly(client: EC2Client, ids: Sequence[str]) -> None:
    """Terminate instances elb started and keeps no longer (a launch that failed): a failure is logged."""
    if not ids:
        return
    try:
        client.terminate_instances(InstanceIds=list(ids))
        log.warning("terminated %s", ", ".join(ids))
    except (BotoCoreError, ClientError) as err:
        log.error("could not terminate %s: %s", ", ".join(ids), to_cloud_error(err, "terminating"))


class Lifecycle:
    """Terminate, stop and start the cluster's workers; wait for new or started instances to run."""

    def __init__(self, ctx: Ec2Context, instances: Instances) -> None:
        self.ctx = ctx
        self.instances = instances

    def terminate(self, instance_ids: Sequence[str]) -> None:
        """Terminate workers of this cluster. Any other id refuses the whole call (nothing terminated)."""
        ids = list(dict.fromkeys(instance_ids))
        if not ids:
            return
        raws = self.instances.owned(ids, "terminate")
        owned = {i: r.get("State", {}).get("Name", "") for i, r in raws.items()}
        live = [i for i in ids if owned[i] != "terminated"]
        for start in range(0, len(live), TERMINATE_BATCH):
            batch = live[start : start + TERMINATE_BATCH]
            try:
                self.ctx.client.terminate_instances(InstanceIds=batch)
            except (BotoCoreError, ClientError) as err:
                raise to_cloud_error(err, f"terminating {', '.join(batch)}") from None
            log.info("terminating %s", ", ".join(batch))
        if self.ctx.host_keys is not None:  # the nodes are gone: so are their keys
            self.ctx.host_keys.forget(n for n in (tags_of(raws[i]).get(TAG_NAME) for i in ids) if n)

    def stop(self, instance_ids: Sequence[str]) -> None:
        """Stop workers of this cluster (``StopInstances``) and wait until they are stopped, at
        most ``boot_timeout``. An instance-store root (lost on stop) is refused, as is a spot
        worker (EC2 refuses to stop a one-time request's instance) and any id that is not a
        worker of this cluster: nothing is stopped. Stopped ones are left as they are."""
        ids = list(dict.fromkeys(instance_ids))
        if not ids:
            return
        owned = self.instances.owned(ids, "stop")
        gone = [i for i in ids if owned[i].get("State", {}).get("Name") in GONE_STATES]
        if gone:
            raise CloudError(f"cannot stop {', '.join(gone)}: terminated")
        store = [i for i in ids if owned[i].get("RootDeviceType") == "instance-store"]
        if store:
            raise CloudError(f"refusing to stop {', '.join(store)}: an instance-store root is lost on stop")
        spot = [i for i in ids if owned[i].get("InstanceLifecycle") == "spot"]
        if spot:
            raise CloudError(
                f"refusing to stop {', '.join(spot)}: EC2 stops no spot instance of a one-time request (elb's spot "
                "workers are all such)"
            )
        todo = [i for i in ids if owned[i].get("State", {}).get("Name") not in ("stopping", "stopped")]
        if todo:
            try:
                self.ctx.client.stop_instances(InstanceIds=todo)
            except (BotoCoreError, ClientError) as err:
                raise _start_stop_error(err, f"stopping {', '.join(todo)}") from None
            log.info("stopping %s", ", ".join(todo))
        waited = self._wait_state(ids, "stopped", self.ctx.clock() + self.ctx.config.boot_timeout, "stopping")
        if waited[1]:
            raise CloudError("; ".join(waited[1].values()), retryable=True)

    def start(self, instance_ids: Sequence[str]) -> LaunchResult:
        """Start stopped workers of this cluster (``StartInstances``) and wait until each runs
        with a private address, at most ``boot_timeout``; the address may differ from the one it
        had. Any id that is not a worker of this cluster refuses the whole call. An instance that
        does not run in time is in ``failed`` (by node name) and left as it is."""
        ids = list(dict.fromkeys(instance_ids))
        if not ids:
            return LaunchResult(launched=())
        owned = self.instances.owned(ids, "start")
        gone = [i for i in ids if owned[i].get("State", {}).get("Name") in GONE_STATES]
        if gone:
            raise CloudError(f"cannot start {', '.join(gone)}: terminated")
        todo = [i for i in ids if owned[i].get("State", {}).get("Name") in ("stopped", "stopping")]
        if todo:
            try:
                self.ctx.client.start_instances(InstanceIds=todo)
            except (BotoCoreError, ClientError) as err:
                raise _start_stop_error(err, f"starting {', '.join(todo)}") from None
            log.info("starting %s", ", ".join(todo))
        running, failed = self._wait_state(ids, "running", self.ctx.clock() + self.ctx.config.boot_timeout, "starting")
        names = {i: tags_of(r).get(TAG_NAME, i) for i, r in owned.items()}
        return LaunchResult(launched=tuple(running), failed={names[i]: why for i, why in failed.items()})

    def _wait_state(
        self, ids: Sequence[str], target: str, deadline: float, doing: str
    ) -> tuple[list[Instance], dict[str, str]]:
        """Poll until each instance is in ``target`` (running: with a private address): those
        that are, and why each other is not (by id), once all are or at ``deadline``."""
        waiting = set(ids)
        done: list[Instance] = []
        failed: dict[str, str] = {}
        while waiting:
            for raw in self.instances.poll(sorted(waiting)):
                iid = raw.get("InstanceId", "")
                state = raw.get("State", {}).get("Name", "unknown")
                if iid not in waiting:
                    continue
                if state == target and (target != "running" or raw.get("PrivateIpAddress")):
                    done.append(self.instances.to_instance(raw))
                    waiting.discard(iid)
                elif state in GONE_STATES:
                    failed[iid] = f"instance {iid} went {state} while {doing}"
                    waiting.discard(iid)
            if not waiting:
                break
            if self.ctx.clock() >= deadline:
                for iid in sorted(waiting):
                    failed[iid] = f"instance {iid} not {target} within {self.ctx.config.boot_timeout:g}s of {doing}"
                break
            self.ctx.sleep(min(self.ctx.poll_interval, max(0.0, deadline - self.ctx.clock())))
        return done, failed

    def wait_running(
        self, started: Mapping[str, str], deadline: float, volume_tags: Mapping[str, Sequence[TagTypeDef]]
    ) -> tuple[list[Instance], dict[str, str]]:
        """Poll until every instance runs with a private IP; terminate those that don't in time.
        The volumes of the nodes in ``volume_tags`` get their tags once they run."""
        waiting = dict(started)
        ready: list[Instance] = []
        failed: dict[str, str] = {}
        to_kill: list[str] = []
        try:
            while waiting:
                for raw in self.instances.poll(list(waiting.values())):
                    iid = raw.get("InstanceId", "")
                    name = next((n for n, i in waiting.items() if i == iid), None)
                    if name is None:
                        continue
                    state = raw.get("State", {}).get("Name", "unknown")
                    if state == "running" and raw.get("PrivateIpAddress"):
                        ready.append(self.instances.to_instance(raw))
                        del waiting[name]
                        if name in volume_tags:
                            tag_volumes(self.ctx.client, self.ctx.cluster, name, raw, volume_tags[name])
                    elif state not in ("pending", "running"):
                        reason = raw.get("StateReason", {}).get("Message", "")
                        failed[name] = f"instance {iid} went {state} while booting {reason}".strip()
                        to_kill.append(iid)
                        del waiting[name]
                if not waiting:
                    break
                if self.ctx.clock() >= deadline:
                    for name, iid in waiting.items():
                        failed[name] = (
                            f"instance {iid} not running with a private address within "
                            f"{self.ctx.config.boot_timeout:g}s; terminated"
                        )
                        to_kill.append(iid)
                    waiting.clear()
                    break
                self.ctx.sleep(min(self.ctx.poll_interval, max(0.0, deadline - self.ctx.clock())))
        except CloudError:
            # Cannot watch them any more: do not leave them behind.
            terminate_quietly(self.ctx.client, [*waiting.values(), *to_kill])
            raise
        terminate_quietly(self.ctx.client, to_kill)
        return ready, failed
