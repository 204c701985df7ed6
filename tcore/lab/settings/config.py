"""The lab's configuration file and the constants several lab modules share: one home that they all import.

compile-lab.toml (in the working directory, or the file named by $COMPILE_LAB_CONFIG) holds a table per concern, each
read by the module it configures (TABLES): [limits] and [instructor] (tcore.lab.policy.limits), [models]
(tcore.lab.policy.limits.files_allowed), [cluster] (tcore.lab.launch.cluster), [room] (tcore.lab.queue.room). This
module only finds and parses the file; it imports no other lab module, so any of them can import it.
"""
from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Mapping

from tcore.experiment.spec import SpecError

REPO_ROOT = Path(__file__).resolve().parents[3]  # what a worker runs from, and what Ray ships to a cluster's nodes
CONFIG_ENV = "COMPILE_LAB_CONFIG"
CONFIG_NAME = "compile-lab.toml"
TORCH_TRACE_DIR = "torch_trace"  # in a worker's folder: the TORCH_TRACE log(s) of its compile
TABLES = ("limits", "instructor", "models", "cluster", "room")
# the settings of the tables whose readers take a key each (limits, cluster and room check their own): a misspelt
# key would otherwise be silently ignored (`passcod = ...` leaves the panel without a passcode)
KEYS = {"instructor": ("passcode",), "models": ("allow_files",)}


class LimitsError(SpecError):
    """The instructor's limits are written wrongly; the message names the setting and where it came from.

    A SpecError, so that every page and command that shows a refused run shows this too: no run can start.
    Raised too for a configuration file that is missing where $COMPILE_LAB_CONFIG points, or is not TOML.
    """


def read(environ: Mapping[str, str], cwd: str | Path | None) -> tuple[dict[str, Any], Path]:
    """The config file's tables ({} when there is no file) and its path."""
    path = Path(environ[CONFIG_ENV]) if environ.get(CONFIG_ENV) else Path(cwd or os.getcwd()) / CONFIG_NAME
    if environ.get(CONFIG_ENV) and not path.is_file():
        raise LimitsError(f"{CONFIG_ENV}={environ[CONFIG_ENV]} names no file")
    if not path.is_file():
        return {}, path
    try:
        config = tomllib.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as e:
        raise LimitsError(f"{path} is not UTF-8 text (byte {e.start}): save it as UTF-8") from None
    except tomllib.TOMLDecodeError as e:
        raise LimitsError(f"{path} is not valid TOML: {e}") from None
    except OSError as e:
        raise LimitsError(f"{path} cannot be read: {e.strerror or e}") from None
    unknown = sorted(set(config) - set(TABLES))
    if unknown:  # `[limit]`: no limits would apply
        raise LimitsError(f"{path}: unknown table(s) {', '.join(f'[{t}]' for t in unknown)}; known: "
                          f"{', '.join(f'[{t}]' for t in TABLES)}")
    for table in TABLES:  # each a [table]; `limits = 5` is a value, not one
        if table in config and not isinstance(config[table], dict):
            raise LimitsError(f"{path}: {table} must be a table ([{table}] on a line of its own, its settings "
                              f"below it), not {config[table]!r}")
    for table, keys in KEYS.items():
        unknown = sorted(set(config.get(table, {})) - set(keys))
        if unknown:
            raise LimitsError(f"{path}: unknown setting(s) in [{table}]: {', '.join(unknown)}; known: "
                              f"{', '.join(keys)}")
    return config, path
