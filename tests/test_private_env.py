"""Which environment variables stay in the lab's own processes, never in a worker's or a model file reader's."""
import os
import subprocess
import sys

from tcore.lab.settings import private
from tcore.lab.settings.config import REPO_ROOT


def test_secret_names_are_private_and_others_are_not():
    for name in ("COMPILE_LAB_INSTRUCTOR_PASSCODE", "HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD",
                 "OPENAI_API_KEY", "GOOGLE_APPLICATION_CREDENTIALS"):
        assert private.is_private(name), name
    for name in ("TOKENIZERS_PARALLELISM", "PATH", "TORCHINDUCTOR_CACHE_DIR", "KEYBOARD", "HOME"):
        assert not private.is_private(name), name


def test_the_command_line_starts_again_without_them():
    """What a model file in one of its children could read of it: /proc/<its pid>/environ."""
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), HF_TOKEN="hf-secret", COMPILE_LAB_INSTRUCTOR_PASSCODE="sesame")
    probe = ("import runpy, sys; from tcore.lab.settings import private; private.reexec_without_private(); "
             "print(open(f'/proc/{__import__(\"os\").getpid()}/environ', 'rb').read())")
    out = subprocess.run([sys.executable, "-c", probe], env=env, cwd=REPO_ROOT, capture_output=True, text=True,
                         check=True).stdout
    assert "PYTHONPATH" in out and "hf-secret" not in out and "sesame" not in out
