"""elb: an elastic load balancer for Grid Engine and Slurm clusters on EC2.

Its packages, from the bottom up (docs/architecture.md; tests/unit/test_layout.py holds the
rules):

- ``elb.core``: the values and the pure rules: the model, the joined state, the planner, the
  policies, the config. Imports no other package of elb.
- ``elb.provision``: Ansible through ansible-runner. Imports ``elb.core``.
- ``elb.schedulers``: the scheduler drivers (``sge``, ``slurm``). Import ``elb.core``.
- ``elb.clouds``: the cloud adapters (``ec2``, ``local``). Import ``elb.core`` and
  ``elb.provision``.
- ``elb.service``: the daemon and what it keeps (journal, stats, metrics). Imports the above.
- ``elb.simulate``: ``elb simulate``, the planner on replayed job logs.
- ``elb.cli``: the ``elb`` command. May import any of them.

Nothing in elb imports ``elbdev`` (the test cluster and the demos), which is not in the wheel.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("elb")  # pyproject.toml's, from the installed metadata
except PackageNotFoundError:  # a checkout on PYTHONPATH with no install of elb at all
    __version__ = "0+unknown"
