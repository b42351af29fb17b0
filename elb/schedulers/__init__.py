"""The scheduler drivers behind ``elb.core.scheduler.Scheduler``: Grid Engine (``sge``) and
Slurm (``slurm``), each the only place that runs its scheduler's commands; ``usage``, their
accounting for ``elb spend``. They import ``elb.core`` (and Slurm's driver runs its commands
through Grid Engine's runner); never ``elb.clouds``, ``elb.service`` or ``elb.cli``.
"""
