"""Slurm as a scheduler: the programs its power saving calls, and what elb reads of it."""
