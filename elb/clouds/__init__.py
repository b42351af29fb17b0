"""The cloud adapters behind ``elb.core.interfaces.Cloud``: EC2 (``ec2``, boto3) and the test
cluster's podman nodes (``local``); each module serves its name in ``elb.core.registry`` (``make``,
``elb validate``'s ``checks``, ``notices``: ``ec2.entry``, ``local``). They import
``elb.core`` and ``elb.provision`` (the nodes' host keys, the inventory); never
``elb.schedulers``, ``elb.service`` or ``elb.cli``.
"""
