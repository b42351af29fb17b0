"""The node group tags a pass gives workers that lack them, as actions. Pure.

elb tags every worker it launches with its node group (``TAG_GROUP``); a worker launched before
it did has none, so the dynamic inventory cannot place it among several groups and an adoption
after a lost journal cannot either. ``plan_group_tags`` plans the tag for each worker of the
journal (not gone) whose instance the cloud lists without it, when its group is known
(``elb.core.groups.known_group``: the group its record names, or the one group there is): a
record without a group among several is given the first group's variables by elb's plays, but
that is no knowledge of its group, and a tag would place it there for good.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from elb.core.groups import NodeGroups, known_group
from elb.core.interfaces import TAG_GROUP
from elb.core.state import GONE, ClusterState


@dataclass(frozen=True, slots=True)
class GroupTag:
    """A worker whose instance gets its node group's tag (``TagsGroups.tag_groups``), and why."""

    node: str
    instance_id: str
    group: str
    reason: str


# After the cloud refused to tag (a site whose IAM policy predates the tag's statement: every call
# refused), the tags wait this long before they are asked for again: not a call and a warning a pass.
TAG_RETRY = 3600.0


def tags_due(refused_at: float | None, now: float) -> bool:
    """Whether a pass at ``now`` may ask the cloud for tags, the last refusal at ``refused_at``
    (None: none since elb started, or the last call went through)."""
    return refused_at is None or now - refused_at >= TAG_RETRY


UNTAGGED = (
    f"its instance has no {TAG_GROUP} tag (launched before elb set it), which the dynamic inventory and an "
    "adoption place a worker by"
)


def plan_group_tags(state: ClusterState, groups: NodeGroups) -> tuple[GroupTag, ...]:
    """A tag for each of ``state``'s workers (a record not gone, its instance listed) whose
    instance lacks ``TAG_GROUP`` and whose group is known; in the records' order."""
    out: list[GroupTag] = []
    for m in state.nodes:
        inst = m.instance
        if inst is None or m.record.state in GONE or TAG_GROUP in inst.tags or not inst.instance_id:
            continue
        group = known_group(m.record.group, groups)
        if group is not None:
            out.append(GroupTag(m.name, inst.instance_id, group.name, UNTAGGED))
    return tuple(out)


def describe_tags(tags: Sequence[GroupTag]) -> list[str]:
    """One line per group and reason: ``tag node001, node002 elb:group=gpu: REASON``."""
    nodes: dict[tuple[str, str], list[str]] = {}
    for t in tags:
        nodes.setdefault((t.group, t.reason), []).append(t.node)
    return [f"tag {', '.join(names)} {TAG_GROUP}={group}: {reason}" for (group, reason), names in nodes.items()]
