"""``python -m elb`` runs the same CLI as the ``elb`` console script."""

import sys

from elb.cli.main import main

sys.exit(main())
