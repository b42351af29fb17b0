"""The node group tags a pass gives workers that lack them, as actions. Pure.

elb tags every worker it launches with its node group (``TAG_GROUP``); a worker launched before
it did has none, so the dynamic inventory cannot place it among several groups and an adoption
after a lost journal cannot either. ``plan_group_tags`` plans the tag for each worker of the
journal (not gone) whose instance the cloud lists without it, when its group is known
(``elb.core.groups.known_group``: the group its record names, or the one group there is): a
record without a group among several is given the first group's variables by elb's plays, but
that is no knowledge of its group, and a tag would place it there for good.

After the cloud refused (``TagRefusal``, kept in the journal so that ``elb nodes`` reads it too),
the tags wait ``TAG_RETRY`` (``tags_due``). ``untagged_workers`` is what a pass and ``elb nodes``
both say of each worker still without its tag: whether this pass asks for it, or when it will.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from elb.core.durations import utc_minute
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


@dataclass(frozen=True, slots=True)
class TagRefusal:
    """The cloud's last refusal to tag: when, and its error."""

    at: float
    error: str

    @property
    def retry_at(self) -> float:
        """When the tags may be asked for again."""
        return self.at + TAG_RETRY


def tags_due(refused: TagRefusal | None, now: float) -> bool:
    """Whether a pass at ``now`` may ask the cloud for tags, the last refusal ``refused`` (None:
    none, or the last call went through)."""
    return refused is None or now >= refused.retry_at


@dataclass(frozen=True, slots=True)
class UntaggedWorker:
    """A worker whose instance lacks its node group's tag (``tag``); ``due``: a pass at the time
    it was found asks the cloud for it (``tags_due``), else it waits out ``refused``."""

    tag: GroupTag
    refused: TagRefusal | None
    due: bool

    def describe(self) -> str:
        """``group tag elb:group=gpu not yet set: ...``: set at the next pass, or refused and when
        it is asked again."""
        head = f"group tag {TAG_GROUP}={self.tag.group} not yet set"
        if self.refused is None:
            return f"{head}: set at the next pass"
        again = "at the next pass" if self.due else f"at {utc_minute(self.refused.retry_at)}"
        refused = f"the cloud refused it at {utc_minute(self.refused.at)} ({self.refused.error})"
        return f"{head}: {refused}, asked again {again}"

    def as_json(self) -> dict[str, object]:
        r = self.refused
        return {
            "node": self.tag.node,
            "instance": self.tag.instance_id,
            "group": self.tag.group,
            "refused_at": None if r is None else r.at,
            "refusal": None if r is None else r.error,
            "asked_again_at": None if r is None or self.due else r.retry_at,
            "line": self.describe(),
        }


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


def untagged_workers(
    state: ClusterState, groups: NodeGroups, refused: TagRefusal | None, now: float
) -> tuple[UntaggedWorker, ...]:
    """Each of ``state``'s workers whose tag ``plan_group_tags`` plans, with whether a pass at
    ``now`` asks for it after ``refused`` (``tags_due``): the pass's decision, and what
    ``elb nodes`` says of each."""
    due = tags_due(refused, now)
    return tuple(UntaggedWorker(t, refused, due) for t in plan_group_tags(state, groups))


def describe_tags(tags: Sequence[GroupTag]) -> list[str]:
    """One line per group and reason: ``tag node001, node002 elb:group=gpu: REASON``."""
    nodes: dict[tuple[str, str], list[str]] = {}
    for t in tags:
        nodes.setdefault((t.group, t.reason), []).append(t.node)
    return [f"tag {', '.join(names)} {TAG_GROUP}={group}: {reason}" for (group, reason), names in nodes.items()]
