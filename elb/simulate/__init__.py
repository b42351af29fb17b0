"""``elb simulate``: replay real job logs through a simulated elastic SGE cluster.

``swf`` reads the logs, ``engine`` is the simulated cluster and cloud driving a real policy,
``report`` measures, ``runner`` builds policies and replays, ``cli`` is the subcommand.

Imports ``elb.core``, Grid Engine's demand model and parsers (``elb.schedulers.sge``)
and the command line's helpers (``elb.cli``).
"""
