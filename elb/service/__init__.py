"""The daemon and what it keeps: the pass (``daemon``), the node operations and their executor
(``actuator``, ``executor``), the journal (``journal``, ``migrations``), the pass's record, the
stats, the metrics, the logs and systemd's notifications, the factory that builds the adapters
a config names, and a new node's size (``nodesize``). Imports ``elb.core``, ``elb.schedulers``,
``elb.clouds`` and ``elb.provision``; never ``elb.cli``.
"""
