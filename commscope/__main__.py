"""``python -m commscope`` runs the commscope command line."""

from __future__ import annotations

import sys

from commscope.pipeline.cli import main

sys.exit(main())
