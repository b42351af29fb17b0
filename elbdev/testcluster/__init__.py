"""The test cluster on one machine (docs/testcluster.md): a real Grid Engine master (and
Slurm's controller, ``slurm``) in a UTS namespace of its own, nodes in podman containers launched
by elb's local cloud and configured by elb's playbooks. ``cli`` is ``python -m elbdev
testcluster``; ``cluster.TestCluster`` the API the tests and the demos use. Imports any of elb.
"""
