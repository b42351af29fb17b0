"""Slurm as a scheduler: the programs its power saving calls, and what elb reads of it.

Imports ``elb.core`` and Grid Engine's command runner (``elb.schedulers.sge``).
"""
