"""The cloud adapters behind ``elb.core.interfaces.Cloud``: EC2 (``ec2``, boto3) and the test
cluster's podman nodes (``local``); ``checks``, ``elb validate``'s checks of either. They import
``elb.core`` and ``elb.provision`` (the nodes' host keys, the inventory); never
``elb.schedulers``, ``elb.service`` or ``elb.cli``.
"""
