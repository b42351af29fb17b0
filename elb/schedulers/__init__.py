"""The scheduler drivers behind ``elb.core.scheduler.Scheduler``: Grid Engine (``sge``) and
Slurm (``slurm``), each the only place that runs its scheduler's commands; ``usage``, their
accounting for ``elb spend``; what the drivers share, owned by neither: ``process`` (running a
command, its time-out and retries), ``timestamps``, ``waiting``. They import ``elb.core``; never
``elb.clouds``, ``elb.service`` or ``elb.cli``.
"""
