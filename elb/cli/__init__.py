"""The ``elb`` command: the parser (``main``) and each module's verbs (``commands``, ``dryrun``,
``validate``, ``init``, ``monitoring``, ``plot``, ``completion``, ``systemd``: the unit's
install, ...). May import every package of elb, never ``elbdev``.
"""
