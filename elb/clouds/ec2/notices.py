"""EC2's notices about workers, from an SQS queue that EventBridge rules feed.

AWS announces what will happen to an instance as EventBridge events: a spot interruption warning
(two minutes before a spot instance is taken back), a rebalance recommendation (its risk of
interruption went up), an instance state change, and AWS Health's scheduled changes (a
retirement or maintenance of the host). ``elb ec2-events setup`` creates one rule per kind with
this cluster's queue as the target (``setup_events``); every pass the daemon reads the queue
(``Ec2Notices.poll``, bounded) and acts on the notices about its own workers.

``parse_event`` is pure: it turns one event's JSON into a ``Notice`` (provider-neutral: the kind,
the instance, when, and a line for the log), ``None`` for an event about something else, and
raises ``NoticeError`` for a message that is not such an event. The shapes are AWS's documented
ones ("EC2 Spot Instance Interruption Warning", "EC2 Instance Rebalance Recommendation",
"EC2 Instance State-change Notification", "AWS Health Event").
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from elb.clouds.ec2.config import Ec2Config
from elb.core.interfaces import CloudError, Notice, NoticeKind

log = logging.getLogger("elb")

# Messages read per pass at most (SQS returns at most 10 per call).
MAX_MESSAGES_PER_POLL = 50
_MAX_RULE_NAME = 64  # EventBridge's limit on a rule name


class NoticeError(ValueError):
    """A message that is not an EventBridge event elb can read."""


# The EventBridge rules ``setup_events`` creates: name suffix -> event pattern.
RULES: Mapping[str, Mapping[str, Any]] = {
    "spot-interruption": {"source": ["aws.ec2"], "detail-type": ["EC2 Spot Instance Interruption Warning"]},
    "rebalance": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance Rebalance Recommendation"]},
    "state-change": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance State-change Notification"]},
    "scheduled-change": {
        "source": ["aws.health"],
        "detail-type": ["AWS Health Event"],
        "detail": {"service": ["EC2"], "eventTypeCategory": ["scheduledChange"]},
    },
}


def _time(event: Mapping[str, Any]) -> float:
    text = event.get("time")
    if not isinstance(text, str):
        raise NoticeError("event without a time")
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise NoticeError(f"event time {text!r} is not ISO 8601") from None


def _instance(detail: Mapping[str, Any]) -> str:
    iid = detail.get("instance-id")
    if not isinstance(iid, str) or not iid.startswith("i-"):
        raise NoticeError(f"event without an instance id (instance-id is {iid!r})")
    return iid


def parse_event(body: str) -> list[Notice]:
    """The notices one EventBridge event (an SQS message body) carries; [] for an event about
    something elb does not act on. Raises ``NoticeError`` for a body that is not an event."""
    try:
        event = json.loads(body)
    except json.JSONDecodeError as err:
        raise NoticeError(f"not JSON: {err.msg} at {err.pos}") from None
    if not isinstance(event, dict):
        raise NoticeError("not a JSON object")
    kind_text, source, detail = event.get("detail-type"), event.get("source"), event.get("detail")
    if not isinstance(kind_text, str) or not isinstance(source, str) or not isinstance(detail, dict):
        raise NoticeError("not an EventBridge event (detail-type, source, detail)")
    when = _time(event)
    read = _READERS.get((source, kind_text))
    return [] if read is None else read(detail, when)


def _interruption(detail: Mapping[str, Any], when: float) -> list[Notice]:
    action = detail.get("instance-action", "?")
    return [Notice(NoticeKind.INTERRUPTION, _instance(detail), when, f"spot interruption: {action}")]


def _rebalance(detail: Mapping[str, Any], when: float) -> list[Notice]:
    return [Notice(NoticeKind.REBALANCE, _instance(detail), when, "rebalance recommendation")]


def _state_change(detail: Mapping[str, Any], when: float) -> list[Notice]:
    state = detail.get("state", "?")
    return [Notice(NoticeKind.STATE, _instance(detail), when, f"state {state}")]


def _scheduled_change(detail: Mapping[str, Any], when: float) -> list[Notice]:
    """An AWS Health event's notices: one per instance it affects, for EC2's scheduled changes only."""
    if detail.get("service") != "EC2" or detail.get("eventTypeCategory") != "scheduledChange":
        return []
    code = str(detail.get("eventTypeCode", "?"))
    entities = detail.get("affectedEntities", [])
    if not isinstance(entities, list):
        raise NoticeError("AWS Health event: affectedEntities is not a list")
    ids = [e.get("entityValue") for e in entities if isinstance(e, dict)]
    return [
        Notice(NoticeKind.SCHEDULED, iid, when, f"scheduled change {code}")
        for iid in ids
        if isinstance(iid, str) and iid.startswith("i-")
    ]


# The events elb acts on, by (source, detail-type): each one's reader of its detail.
_READERS: Mapping[tuple[str, str], Callable[[Mapping[str, Any], float], list[Notice]]] = {
    ("aws.ec2", "EC2 Spot Instance Interruption Warning"): _interruption,
    ("aws.ec2", "EC2 Instance Rebalance Recommendation"): _rebalance,
    ("aws.ec2", "EC2 Instance State-change Notification"): _state_change,
    ("aws.health", "AWS Health Event"): _scheduled_change,
}


class Ec2Notices:
    """Reads the cluster's notice queue. ``client``: a boto3 SQS client."""

    def __init__(self, client: Any, queue_url: str, *, max_messages: int = MAX_MESSAGES_PER_POLL) -> None:
        self.client = client
        self.queue_url = queue_url
        self.max_messages = max_messages

    def poll(self) -> list[Notice]:
        """The notices waiting in the queue (at most ``max_messages`` messages, no waiting).
        Each message read is deleted: a malformed one is logged and dropped, never retried."""
        notices: list[Notice] = []
        read = 0
        while read < self.max_messages:
            try:
                resp = self.client.receive_message(
                    QueueUrl=self.queue_url,
                    MaxNumberOfMessages=min(10, self.max_messages - read),
                    WaitTimeSeconds=0,
                )
            except (BotoCoreError, ClientError) as err:
                raise CloudError(f"reading the notice queue: {err}", retryable=True) from None
            messages = resp.get("Messages", [])
            if not messages:
                break
            read += len(messages)
            for m in messages:
                try:
                    notices.extend(parse_event(str(m.get("Body", ""))))
                except NoticeError as err:
                    log.warning("notice queue: dropped message %s: %s", m.get("MessageId", "?"), err)
                self._delete(m)
        return notices

    def _delete(self, message: Mapping[str, Any]) -> None:
        try:
            self.client.delete_message(QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"])
        except (BotoCoreError, ClientError, KeyError) as err:  # read again later: harmless, notices repeat
            log.warning("notice queue: could not delete message %s: %s", message.get("MessageId", "?"), err)


def sqs_client(cfg: Ec2Config) -> Any:
    """A boto3 SQS client in elb's region (and endpoint, for tests)."""
    return _client("sqs", cfg)


def events_client(cfg: Ec2Config) -> Any:
    return _client("events", cfg)


def _client(service: str, cfg: Ec2Config) -> Any:
    try:
        return boto3.client(service, region_name=cfg.region, endpoint_url=cfg.endpoint_url)  # type: ignore[call-overload]
    except (BotoCoreError, ClientError) as err:
        raise CloudError(f"cannot make an {service} client: {err}") from None


def queue_url(sqs: Any, cluster: str) -> str:
    """The URL of the cluster's notice queue; CloudError naming the fix when it is missing."""
    try:
        return str(sqs.get_queue_url(QueueName=queue_name(cluster))["QueueUrl"])
    except (BotoCoreError, ClientError) as err:
        raise CloudError(f"no notice queue {queue_name(cluster)} ({err}): run elb ec2-events setup") from None


def _digest(cluster: str) -> str:
    return hashlib.sha256(cluster.encode()).hexdigest()[:8]


def queue_name(cluster: str) -> str:
    """``elb-CLUSTER-notices``. SQS takes 1 to 80 of [A-Za-z0-9_-]: a cluster name with a dot
    (which cluster names may have) has it replaced and a digest of the name added."""
    if re.fullmatch(r"[A-Za-z0-9_-]+", cluster):
        return f"elb-{cluster}-notices"
    return f"elb-{re.sub(r'[^A-Za-z0-9_-]', '-', cluster)}-{_digest(cluster)}-notices"


def rule_name(cluster: str, suffix: str) -> str:
    """``elb-CLUSTER-SUFFIX``. EventBridge takes at most 64 characters: a longer one keeps the
    start of the cluster name and adds a digest of the whole name."""
    name = f"elb-{cluster}-{suffix}"
    if len(name) <= _MAX_RULE_NAME:
        return name
    keep = _MAX_RULE_NAME - len(f"elb--{_digest(cluster)}-{suffix}")
    return f"elb-{cluster[:keep]}-{_digest(cluster)}-{suffix}"


def setup_events(sqs: Any, events: Any, cluster: str) -> list[str]:
    """Create (or bring back to shape) the queue, its policy and one EventBridge rule per kind
    of notice targeting it. Returns what it did, a line each. Idempotent."""
    done: list[str] = []
    try:
        url = sqs.create_queue(QueueName=queue_name(cluster))["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        done.append(f"queue {queue_name(cluster)}: {url}")
        rule_arns = []
        for suffix, pattern in RULES.items():
            name = rule_name(cluster, suffix)
            rule_arns.append(events.put_rule(Name=name, EventPattern=json.dumps(pattern), State="ENABLED")["RuleArn"])
            events.put_targets(Rule=name, Targets=[{"Id": "elb-notices", "Arn": arn}])
            done.append(f"rule {name} -> queue")
        policy = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Sid": "EventBridgeSendsNotices",
                    "Effect": "Allow",
                    "Principal": {"Service": "events.amazonaws.com"},
                    "Action": "sqs:SendMessage",
                    "Resource": arn,
                    "Condition": {"ArnEquals": {"aws:SourceArn": rule_arns}},
                }
            ],
        }
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": json.dumps(policy)})
        done.append("queue policy: only these rules may send to it")
    except (BotoCoreError, ClientError) as err:
        raise CloudError(f"setting up the notice queue and rules: {err}") from None
    return done


@dataclass(frozen=True, slots=True)
class EventCheck:
    what: str
    ok: bool
    detail: str


def check_events(sqs: Any, events: Any, cluster: str) -> list[EventCheck]:
    """Whether the queue, its policy and every rule (enabled, targeting the queue) are there."""
    checks: list[EventCheck] = []
    try:
        url = sqs.get_queue_url(QueueName=queue_name(cluster))["QueueUrl"]
        attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn", "Policy"])["Attributes"]
    except (BotoCoreError, ClientError) as err:
        return [EventCheck(f"queue {queue_name(cluster)}", False, f"{err}; run elb ec2-events setup")]
    arn = attrs["QueueArn"]
    checks.append(EventCheck(f"queue {queue_name(cluster)}", True, url))
    policy = attrs.get("Policy", "")
    checks.append(
        EventCheck("queue policy", "events.amazonaws.com" in policy, "EventBridge may send" if policy else "none")
    )
    for suffix in RULES:
        name = rule_name(cluster, suffix)
        try:
            rule = events.describe_rule(Name=name)
            targets = events.list_targets_by_rule(Rule=name).get("Targets", [])
        except (BotoCoreError, ClientError) as err:
            checks.append(EventCheck(f"rule {name}", False, f"{err}; run elb ec2-events setup"))
            continue
        aimed = any(t.get("Arn") == arn for t in targets)
        enabled = rule.get("State") == "ENABLED"
        detail = "enabled, targets the queue" if aimed and enabled else f"state {rule.get('State')}, targets {aimed}"
        checks.append(EventCheck(f"rule {name}", aimed and enabled, detail))
    return checks


__all__: Sequence[str] = (
    "RULES",
    "Ec2Notices",
    "EventCheck",
    "Notice",
    "NoticeError",
    "NoticeKind",
    "check_events",
    "parse_event",
    "setup_events",
)
