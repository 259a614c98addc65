"""``python -m scheduler.scenario``: see ``scheduler.scenario.cli``."""

import sys

from scheduler.scenario.cli import main

if __name__ == "__main__":
    sys.exit(main())
