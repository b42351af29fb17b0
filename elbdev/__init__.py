"""elb's development package: the test cluster on one machine (``testcluster``) and the demos
(``demo``, ``demo_slurm``), run as ``python -m elbdev testcluster ...`` and ``python -m elbdev
demo ...``. Not in the wheel: ``scripts/bootstrap`` puts the checkout on the virtualenv's path.
It may import anything of elb; nothing in elb imports it.
"""
