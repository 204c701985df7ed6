"""`python -m tcore`: the engine's command line (see tcore.cli)."""
import sys

from tcore.lab.settings import private

# The command line needs none of the lab's secrets, and the workers it starts run model files, which could read
# them in its /proc/<pid>/environ: it starts again without them (before anything else is imported).
private.reexec_without_private()

from tcore.cli import main  # noqa: E402

sys.exit(main())
