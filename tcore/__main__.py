"""`python -m tcore`: the engine's command line (see tcore.cli)."""
import sys

from tcore.cli import main

sys.exit(main())
