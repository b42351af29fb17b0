"""The site's configuration as ``qconf`` prints it (``elb.schedulers.sge.site``), and the hard queue list
of a waiting job as ``qstat -xml -r`` prints it."""

from __future__ import annotations

from pathlib import Path

import pytest

from elb.schedulers.sge.errors import SgeParseError
from elb.schedulers.sge.parse import parse_jobs
from elb.schedulers.sge.site import build_site, parse_complex_values, parse_names

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "sge" / "handmade"

GLOBAL = """hostname              global
load_scaling          NONE
complex_values        license=4,\\
                      gpu_pool=2
load_values           NONE
user_lists            NONE
"""


def test_global_host_values_with_a_continued_line() -> None:
    assert dict(parse_complex_values(GLOBAL)) == {"license": "4", "gpu_pool": "2"}


def test_global_host_without_values() -> None:
    assert dict(parse_complex_values("hostname global\ncomplex_values NONE\n")) == {}


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("hostname global\n", "no complex_values line"),
        ("complex_values license\n", "not name=value"),
        ("complex_values a=1,\\\n", "output ends"),
    ],
)
def test_unreadable_global_host_is_refused_with_the_reason(text: str, words: str) -> None:
    with pytest.raises(SgeParseError, match=words):
        parse_complex_values(text)


def test_pe_names() -> None:
    assert parse_names("smp\n\nmpi\n", "qconf -spl") == ("smp", "mpi")
    with pytest.raises(SgeParseError, match="not one name"):
        parse_names("smp mpi\n", "qconf -spl")


def test_a_pe_answer_for_another_name_is_refused() -> None:
    with pytest.raises(SgeParseError, match="describes PE 'smp'"):
        build_site(
            (HERE / "qconf-sc-default.txt").read_text(), {"mpi": (HERE / "qconf-sp-smp.txt").read_text()}, GLOBAL
        )


QSTAT = """<?xml version='1.0'?>
<job_info xmlns:xsd="http://arc.liv.ac.uk/repos/darcs/sge/source/dist/util/resources/schemas/qstat/qstat.xsd">
  <queue_info>
  </queue_info>
  <job_info>
    <job_list state="pending">
      <JB_job_number>7</JB_job_number>
      <JAT_prio>0.00000</JAT_prio>
      <JB_name>bound</JB_name>
      <JB_owner>sgeuser</JB_owner>
      <state>qw</state>
      <JB_submission_time>2026-11-24T10:00:00</JB_submission_time>
      <slots>1</slots>
      <full_job_name>bound</full_job_name>
      <hard_req_queue>other.q</hard_req_queue>
      <hard_req_queue>all.q@node0*</hard_req_queue>
    </job_list>
  </job_info>
</job_info>
"""


def test_hard_queue_list_is_read() -> None:
    (job,) = parse_jobs(QSTAT)
    assert job.hard_queues == ("other.q", "all.q@node0*")


RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "sge" / "recorded"


def test_the_recorded_site_of_the_test_cluster() -> None:
    names = parse_names((RECORDED / "qconf-spl.txt").read_text(), "qconf -spl")
    assert names == ("mpi", "smp")
    site = build_site(
        (RECORDED / "qconf-sc.txt").read_text(),
        {name: (RECORDED / f"qconf-sp-{name}.txt").read_text() for name in names},
        (RECORDED / "qconf-se-global.txt").read_text(),
    )
    assert str(site.pes["smp"].allocation_rule) == "$pe_slots"
    assert str(site.pes["mpi"].allocation_rule) == "$fill_up"
    assert dict(site.global_values) == {}
    h_vmem = site.complexes["h_vmem"]
    assert h_vmem.name == "h_vmem" and site.complexes.get("hostname") is not None


def test_start_times_recorded_from_qstat_j() -> None:
    from elb.schedulers.sge.parse import parse_start_times

    # job 1: qsub -a 202712011200 (the test cluster's clock is UTC); job 3: no -a
    times = parse_start_times((RECORDED / "qstat-j-execution-time.djob.txt").read_bytes())
    assert times == {1: 1827662400.0, 3: None}


def test_start_times_refuse_a_bad_answer() -> None:
    from elb.schedulers.sge.parse import parse_start_times

    with pytest.raises(SgeParseError, match="root element"):
        parse_start_times(b"<job_info/>")
    bad = (
        b"<detailed_job_info><djob_info><element><JB_job_number>x</JB_job_number></element>"
        b"</djob_info></detailed_job_info>"
    )
    with pytest.raises(SgeParseError, match="JB_job_number"):
        parse_start_times(bad)
