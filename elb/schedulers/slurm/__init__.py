"""Slurm as a scheduler: the programs its power saving calls, and what elb reads of it.

Imports ``elb.core`` and what the drivers share (``elb.schedulers.process``, ``timestamps``,
``waiting``); never Grid Engine's driver.
"""
