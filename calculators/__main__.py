"""Entry point for `python -m calculators`."""

import sys

from calculators.interface.cli import main

sys.exit(main())
