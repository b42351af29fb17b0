"""``elb.core.cadence``: when a pass runs, every poll or at a peek that shows new waiting work."""

from __future__ import annotations

import pytest

from elb.core.cadence import Cadence, news, peek_every
from elb.core.config import ConfigError, parse_config
from elb.core.scheduler import Peek


@pytest.mark.parametrize(
    ("poll", "peek", "every"),
    [(60, 10, 10), (60, 25, 20), (60, 7, 60 / 9), (45, 10, 9), (60, 60, 0), (60, 90, 0), (60, 0, 0), (60, 59, 30)],
)
def test_peeks_divide_the_poll_into_whole_looks_never_longer_than_asked(poll: float, peek: float, every: float) -> None:
    assert peek_every(poll, peek) == pytest.approx(every)


def test_news_is_what_waits_now_that_the_baseline_did_not_show() -> None:
    before = Peek(frozenset({"1", "2"}))
    assert news(before, Peek(frozenset({"2", "3"}))) == {"3"}
    assert news(before, Peek(frozenset({"1"}))) == set()  # fewer waiting: nothing new
    assert news(None, Peek(frozenset({"9"}))) == set()  # no baseline yet: the next pass is the poll's


def test_the_poll_and_the_gap_with_half_a_look_of_slack() -> None:
    c = Cadence.of(60.0, 10.0, 30.0)
    assert c.tick == 10.0
    assert c.poll_due(100.0, None)
    assert not c.poll_due(154.0, 100.0)
    assert c.poll_due(155.0, 100.0)  # a look a few seconds early still counts as the poll's
    assert not c.quick_allowed(120.0, 100.0)
    assert c.quick_allowed(130.0, 100.0)
    plain = Cadence.of(60.0, 0.0, 30.0)
    assert plain.tick == 60.0
    assert plain.peek == 0.0


def test_the_config_takes_peeks_of_a_second_or_more_or_none() -> None:
    cfg = parse_config({"cloud": {"provider": "ec2"}})
    assert (cfg.policy.peek_interval, cfg.policy.peek_gap) == (5.0, 10.0)
    off = parse_config({"cloud": {"provider": "ec2"}, "policy": {"peek_interval": 0}})
    assert off.policy.peek_interval == 0.0
    with pytest.raises(ConfigError, match="peek_interval"):
        parse_config({"cloud": {"provider": "ec2"}, "policy": {"peek_interval": 0.5}})
