"""``python -m elbdev`` runs the development commands (``elbdev.cli``)."""

import sys

from elbdev.cli import main

sys.exit(main())
