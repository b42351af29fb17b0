"""The functional core: values and pure rules. Time is passed in; nothing here runs a command,
talks to a cloud or keeps a database.

The model (``model``: jobs, hosts, nodes, plans), the joined state of one pass (``state``), the
interfaces of the shell's adapters (``scheduler``, ``interfaces``), the planner and its rules
(``planner``, ``reconcile``, ``askplan``, ``noticeplan``, ``orders``, ``poolplan``, ``backoff``,
``interruptions``), the scheduler-neutral demand (``demand``), the policies (``policy``), node
groups and names, spend, and the config with its strict YAML loader (``config``, ``yamlfile``;
the one part that reads a file). Imports nothing of elb outside ``elb.core`` (but the version).
"""
