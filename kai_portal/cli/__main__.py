from __future__ import annotations

import sys

from kai_portal.cli.main import main

sys.exit(main())
