"""The command line: `python -m tcore run ...` runs one experiment, `list` and `show` read the store, `models`
lists the models it can run, `calibrate` measures this machine's spread between fresh processes."""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import signal
import sqlite3
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from tcore.analysis import report
from tcore.experiment.protocol import ERROR_KINDS, PHASE_TITLES
from tcore.experiment.spec import Experiment, SpecError, escaped_label
from tcore.lab import (
    ladder,  # imports no torch: its steps run in processes of their own
)
from tcore.lab.launch.cluster import ClusterError
from tcore.lab.run.flags import add_spec_args, experiment_from_args
from tcore.lab.settings.config import LimitsError
from tcore.store import NoSuchRun, RunStore, StoreError, default_path
from tcore.store.records import unreadable_words

ECHO_CHARS = 60  # of a quoted value a refusal repeats: enough to know it again, not a screenful
LONG_WORD_CHARS = 200  # an unquoted word past this is an echo too (file:NAME), not a path someone needs whole
CALIBRATE_MOST_RUNS = 20  # of each reference, queued at once: past this a calibration would hold a room's device
CANCEL_WAIT_S = 300.0  # how long Ctrl-C waits for this command's runs to be cancelled: only a bound on a hang


class ProgressLine:
    """A one-line live status on stderr: phase, progress, elapsed time, latest power."""

    def __init__(self) -> None:
        self.t0 = time.time()
        self.phase = "starting"
        self.progress = ""
        self.watts = None

    def __call__(self, event: dict) -> None:
        if event["type"] == "phase":
            self.phase, self.progress = PHASE_TITLES.get(event["phase"], event["phase"]), ""
        elif event["type"] == "progress":
            self.progress = f"{event['done']}/{event['total']}"
        elif event["type"] == "power" and event["samples"]:
            self.watts = event["samples"][-1][1]
        elif event["type"] == "note":
            sys.stderr.write(f"\rnote: {event['text']}\n")
        power = f"  {self.watts:.0f} W" if self.watts is not None else ""
        sys.stderr.write(f"\r{self.phase} {self.progress}  {time.time() - self.t0:.0f} s{power}\033[K")
        sys.stderr.flush()


def one_line(text: str) -> str:
    """`text` (a run's label, anyone's words) for a terminal, on one line and in the order typed (escaped_label): no
    label writes a made-up row into `tcore list`, over its own row, an escape sequence to the terminal of whoever lists
    a store, or reverses its row with a right-to-left override ("tiny<U+202E> gnp.exe" showed as "tiny exe.png")."""
    return escaped_label(text)


def terminal_lines(message: str | None) -> str:
    """A run's message (a model file's exception: anyone's words) for a terminal: its lines kept, and on each line
    every control and bidirectional character written as its escape (one_line), so no message clears the screen,
    colours the rest of the output or reverses its own words in the terminal of whoever shows the run."""
    return "\n".join(one_line(line) for line in str(message).splitlines()) if message else str(message)


def cut_echoes(message: str) -> str:
    """`message` with each quoted value longer than ECHO_CHARS, and each unquoted word longer than LONG_WORD_CHARS, cut
    to its first ECHO_CHARS characters and its length: a refusal repeats what was typed ('unknown preset ...'), and a
    10 000-character name would fill the terminal."""
    quoted = re.sub(r"'([^'\n]{%d,})'" % (ECHO_CHARS + 1),
                    lambda m: f"'{m[1][:ECHO_CHARS]}…' ({len(m[1])} characters)", message)
    return re.sub(r"([^\s']{%d,}?)([);,.:]*)(?=\s|'|$)" % (LONG_WORD_CHARS + 1),  # its closing marks kept
                  lambda m: f"{m[1][:ECHO_CHARS]}… ({len(m[1])} characters){m[2]}", quoted)


class Parser(argparse.ArgumentParser):
    """argparse, but a mistake on the command line is one line (what is wrong, and where the help is), not the
    whole usage first: `run` has an option per field of the experiment."""

    def error(self, message: str) -> None:  # argparse's contract: print and exit, never return
        self.exit(2, f"{self.prog}: {cut_echoes(message)} (see {self.prog} --help)\n")


def _open_store(path: str | None) -> RunStore:
    """The store at `path`, its results stored before today's figures rewritten once (tcore.lab.outputs.stored_results),
    as the app's server does; where another process holds the store write-locked, the next command rewrites them."""
    from tcore.lab.outputs import stored_results
    from tcore.lab.run.recording import is_locked

    store = RunStore(path)
    try:
        stored_results.upgrade(store, wait=False)
    except sqlite3.OperationalError as e:  # readers are never blocked: the command reads what the store holds now
        if not is_locked(e):
            raise
    return store


def cmd_run(args: argparse.Namespace) -> int:
    from tcore.lab.outputs import model_files
    from tcore.lab.queue import scheduler, waiting
    from tcore.lab.run import registry, runs

    store = _open_store(args.db)
    model_files.install(store, files_allowed=lambda: True, time_limit_s=args.timeout)  # the command line allows files
    scheduler.remove_stale_folders()  # what killed lab processes left in the temporary folder
    try:
        exp = experiment_from_args(args)
        # read before the run is queued: once it runs, this process's only store reads are the run's own, each of
        # which says in words what a full or broken store did to the run
        before = _history_before(store, exp)
        run = runs.start(exp, store, timeout_s=args.timeout, on_event=None if args.quiet else ProgressLine())
    except LimitsError:  # the lab's settings, not the experiment's: said by main(), nothing was queued
        raise
    except SpecError as e:  # invalid settings or the lab's limits: nothing was queued
        print(cut_echoes(f"invalid experiment: {e}"), file=sys.stderr)
        return 2
    print(f"{one_line(exp.label)}\nstore: {store.path}", file=sys.stderr)
    for note in list(run.notes):  # what the checks before the run found: settings that do nothing here, no estimate
        print(f"note: {note}", file=sys.stderr)
    for line in before:  # said before the run: how far this setting moved here so far
        print(line, file=sys.stderr)
    while not run.done:  # the worker's events drive the progress line; this shows the wait before it
        snap = run.snapshot()
        if snap["status"] == "queued" and not args.quiet:
            sys.stderr.write(f"\rqueued: #{snap['queue_position']} in the queue, "
                             f"{waiting.wait_words(snap['wait'])[0]}\033[K")
        run.wait(timeout=1.0)
    record = run.record
    print(file=sys.stderr)
    if run.elsewhere:  # said even with --quiet: the run ended in another process than this one
        print(f"note: {run.notes[-1]}", file=sys.stderr)
    # this process owns them now: it runs them before it exits (tcore.lab.run.runs.run_adopted)
    if registry.adopted_left():
        print("this process took over runs queued by a process that ended; it runs them before it exits "
              "(Ctrl-C leaves them queued for the next process that opens this store)", file=sys.stderr)
        for adopted in runs.run_adopted(lambda r: print(f"  running {r.run_id} ({one_line(r.exp.label)})",
                                                        file=sys.stderr)):
            print(f"  {adopted.run_id}: {adopted.status}", file=sys.stderr)
    if args.json:
        print(json.dumps(dataclasses.asdict(record), indent=2, default=str))
    elif record.status == "finished":
        print(f"run {record.id} on {record.result['device']}\n")
        print(report.text_table(record.result, record.spec, record.device))
        print("\n".join(_history_lines(store, record)))
    if record.status != "finished":
        err = record.error
        print(f"run {record.id} failed: {ERROR_KINDS.get(err.get('kind'), err.get('kind'))}: "
              f"{terminal_lines(err.get('message'))}",
              file=sys.stderr)
        if err.get("traceback"):  # the worker said what failed: its raw trace is one command away, not in the way
            print(f"the raw traceback and the worker's log: python -m tcore show {record.id} --json", file=sys.stderr)
        elif err.get("log_tail") and err.get("kind") not in ("timeout", "cancelled"):
            print("last lines of the worker's log:\n  " + "\n  ".join(err["log_tail"][-15:]), file=sys.stderr)
        return 1
    return 0


def _history_lines(store: RunStore, record) -> list[str]:
    """The runs of the same setting on the same machine before this one, beside its headline."""
    from tcore.analysis import history

    if record.result.get("speedup") is None:
        return []
    try:
        earlier = history.history(store.same_setting(record.spec, record.device, record.env,
                                                     before=record.created_at, exclude=record.id),
                                  store.lab.spread_reset_at())
    except (sqlite3.Error, StoreError) as e:  # the run is recorded; only the comparison is missing
        return [f"earlier runs of this setting: n/a, the run store could not be read ({e})"]
    return report.history_lines(earlier, record.result["speedup"], record.spec.get("cache"))


def _history_before(store: RunStore, exp: Experiment) -> list[str]:
    """Before a run: the earlier runs of its setting on this machine, and whether a rerun can be expected to hold
    ± 5% (tcore.lab.rerun_outlook: the same note the Run page shows above its Run button)."""
    from tcore.lab import rerun_outlook

    found = rerun_outlook.earlier(exp, store)
    earlier = found[1]
    lines = [f"before this run: {earlier.words(cache=exp.cache)}"] if earlier.points else []
    if ahead := rerun_outlook.words(exp, store, found):
        lines.append("  " + ahead.replace("**", ""))
    return lines


def default_words() -> str:
    """The default setting, as --help says it: the same one the Run page opens on."""
    from tcore.experiment.device import practical_defaults
    from tcore.experiment.spec import DEFAULTS

    model = DEFAULTS["model"]
    gpu, cpu = practical_defaults(model, "cuda", "inference"), practical_defaults(model, "cpu", "inference")
    return (f"With no options it runs the lab's default, the same one the Run page opens on: {model}, on a GPU "
            f"{gpu['preset']} at batch {gpu['batch_size']} in {gpu['precision']}, on the CPU {cpu['preset']} at "
            f"batch {cpu['batch_size']} in {cpu['precision']}; whole-model compile, default mode, inference. On a "
            "GPU its speedup holds still between fresh processes (reruns within 1% on an H100); on a CPU it moves "
            "with everything else the machine runs, and a launch-bound setting's moves with the host on a GPU too: "
            "each headline's interval says how far (`python -m tcore calibrate` teaches it this machine's spread).")


def cmd_list(args: argparse.Namespace) -> int:
    from tcore.lab.outputs import model_files

    store = _open_store(args.db)
    model_files.install(store, files_allowed=lambda: False)  # what workers stored of a model file is enough here
    orphaned = _notice_dead_owners(store, "listed")
    records = store.list(limit=args.limit, unreadable=True)
    if args.json:
        print(json.dumps([dataclasses.asdict(r) for r in records], indent=2, default=str))
        return 0
    for r in records:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r.created_at))
        if r.unreadable:  # its id, its status and why, on its row: every other run lists as before
            print(f"{r.id}  {when}  {r.status:8}  {one_line(r.label)}  [unreadable: {one_line(r.unreadable)}; "
                  f"`python -m tcore show {r.id}` says how to delete it]")
            continue
        res = r.result
        interval = (f" ({res['speedup_low']:.2f}-{res['speedup_high']:.2f})" if res.get("speedup_low") is not None
                    else "")
        figures = (f"speedup {res['speedup']:.2f}x{interval}, compile {res['compile_s']:.1f} s"
                   if res.get("speedup") is not None else (r.error_kind or r.status))
        waits = "  (its process ended: the next app or `tcore run` on this store runs it)" if r.id in orphaned else ""
        print(f"{r.id}  {when}  {r.status:8}  {one_line(r.label)}  [{figures}]{waits}")
    return 0


def _notice_dead_owners(store: RunStore, done: str) -> set[str]:
    """The runs left without a live owner; where another process holds the store write-locked, one line says that runs
    whose process ended are `done` as the store has them (readers are never blocked, and do not wait for the lock)."""
    from tcore.lab.run import runs

    orphaned, skipped = runs.notice_dead_owners(store)
    if skipped:
        print(f"compile-lab: another process holds the run store write-locked, so runs whose process ended are {done} "
              "as the store has them (the next process that can write it marks them)", file=sys.stderr)
    return orphaned


def cmd_show(args: argparse.Namespace) -> int:
    from tcore.lab.outputs import model_files

    store = _open_store(args.db)
    model_files.install(store, files_allowed=lambda: False)  # what workers stored of a model file is enough here
    orphaned = _notice_dead_owners(store, "shown")
    record = store.get(args.run_id)
    if args.json:
        print(json.dumps(dataclasses.asdict(record), indent=2, default=str))
    elif record.unreadable:
        print(f"{one_line(record.label)}\n{record.status}\n{one_line(unreadable_words(record))}")
    elif record.result:
        print(f"{one_line(record.label)}\n")
        print(report.text_table(record.result, record.spec, record.device))
        print("\n".join(_history_lines(store, record)))
    elif record.status in ("queued", "running"):  # no outcome yet: say where it stands, not "None: None"
        print(f"{one_line(record.label)}\n{record.status}" + (" (its process ended: the next app or `tcore run` on "
                                                             "this store runs it)" if record.id in orphaned else ""))
    else:
        print(f"{one_line(record.label)}\n{record.status}: {record.error.get('kind')}: "
              f"{terminal_lines(record.error.get('message'))}")
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Reruns of reference settings, so that intervals on this machine rest on the spread it shows
    (tcore.lab.calibrate)."""
    from tcore.lab import calibrate
    from tcore.lab.run import runs

    store = _open_store(args.db)
    device, _ = runs.preflight(Experiment(device=args.device))
    kinds = calibrate.references(device)
    count = sum(len(exps) for exps in kinds.values())
    print(f"Calibrating {device}: fresh runs of {count} reference setting(s), queued at once.")
    for kind, exps in kinds.items():
        for exp in exps:
            print(f"  {kind}: {exp.label}, {calibrate.runs_for(len(exps), args.runs)} runs")

    def ended(record) -> None:
        res = record.result or {}
        said = (f"{res['speedup']:.3f}x ± {res.get('speedup_pm_pct') or 0:.1f}%" if res.get("speedup") else
                f"{record.status}: {(record.error or {}).get('message', '')[:120]}")
        print(f"  {record.id[-6:]} {one_line(record.label)}: {said}", flush=True)

    spreads = calibrate.calibrate(store, device, args.runs, ended)
    gpu = calibrate.machine_env(device).get("gpu")
    for kind, spread in spreads.items():
        print(calibrate.words(kind, spread, gpu))
    return 0 if all(s is not None for s in spreads.values()) else 1


def cmd_set_aside(args: argparse.Namespace) -> int:
    """Rename a damaged run store (and its -wal and -shm files) to runs.sqlite.damaged-YYYYMMDD-HHMMSS beside it, so
    that the next page or command starts a new, empty store at its path; nothing is deleted. A store SQLite reads
    without error is left where it is. The app needs no restart."""
    from tcore.store.connection import set_aside

    if args.db is not None and not args.db.strip():  # `--db ''` (an unset shell variable): not the default
        raise StoreError(f"the run store's path is empty: name a file (or leave the option out for {default_path()})")
    path = Path(args.db) if args.db is not None else default_path()
    target, moved, why = set_aside(path)
    also = " and ".join(m.name.removeprefix(path.name) for m in moved if m != path)
    print(f"moved the damaged run store {path} to {target}" + (f" (with its {also} file)" if also else ""))
    print(f"what was wrong: {why}")
    print(f"the next page or command makes a new, empty store at {path}; the damaged one is kept, and "
          f"`sqlite3 {target} .recover` may get runs back from it")
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    """Model names, one a line: every source's (a count per source), or one source's filtered by a pattern."""
    import sample_models

    if not args.source:
        for source in sample_models.SOURCES:
            names = sample_models.catalog(source)
            shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
            print(f"{source:12} {len(names):5} models  {shown}")
        print("\npython -m tcore models SOURCE [PATTERN] lists one source; PATTERN is a substring or a *glob*.")
        return 0
    if args.source not in sample_models.SOURCES:
        print(cut_echoes(f"unknown source {args.source!r}; choose one of: {', '.join(sample_models.SOURCES)}"),
              file=sys.stderr)
        return 2
    for name in sample_models.catalog(args.source, args.pattern or ""):
        print(name)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Runs a command; what goes wrong outside a run (a store that cannot be used, an unknown run id, the lab's
    settings written wrongly, output closed early) is one line on stderr and a non-zero exit, with nothing changed.
    Ctrl-C cancels the command's own runs (interrupted) and exits with 130; SIGTERM (`kill`, a service manager, a
    job's time limit) does the same and exits with 143."""
    if threading.current_thread() is threading.main_thread():  # a test may call main() from another thread
        signal.signal(signal.SIGTERM, _terminated)
    try:
        return _main(argv)
    except StoreError as e:
        print(cut_echoes(f"python -m tcore: {e}"), file=sys.stderr)
        return 2
    except NoSuchRun as e:
        print(cut_echoes(f"python -m tcore: {e}"), file=sys.stderr)
        return 1
    except LimitsError as e:  # compile-lab.toml or a COMPILE_LAB_ variable written wrongly: its line names the key
        print(f"python -m tcore: the lab's settings cannot be read: {e}", file=sys.stderr)
        return 2
    except ClusterError as e:  # the cluster configured cannot be used: the message says what to do
        print(cut_echoes(f"python -m tcore: {e}"), file=sys.stderr)
        return 2
    except sqlite3.DatabaseError as e:  # a store that opened but breaks when read further (a damaged page)
        print(f"python -m tcore: the run store cannot be read: {e}", file=sys.stderr)
        return 2
    except Terminated:
        return interrupted(signal.SIGTERM)
    except KeyboardInterrupt:
        return interrupted()
    except BrokenPipeError:  # `tcore list | head -1`: the reader has what it wanted; nothing to say
        # Python would report the broken pipe again when it flushes stdout at exit: point stdout at nothing
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a command killed by a closed pipe


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the command is, as Ctrl-C raises KeyboardInterrupt: a run ended this way is cancelled,
    not left running in the store until its owner is found gone and then recorded crashed."""


def _terminated(signum, frame) -> None:
    raise Terminated()


def interrupted(signum: int = signal.SIGINT) -> int:
    """Ctrl-C (or SIGTERM): this command's own runs, queued or running, are cancelled in the store (one left queued
    would run later, for no one), and one line says so. Runs it took over from a process that ended stay queued for the
    next process that opens the store, as `run` said when it took them; one it had started is cancelled too, and named
    (its worker ends with this process: left `running`, it waited for another process to find it crashed)."""
    for each in (signal.SIGINT, signal.SIGTERM):  # a second signal while a worker stops would leave its run behind
        signal.signal(each, signal.SIG_IGN)
    registry = sys.modules.get("tcore.lab.run.registry")  # never imported: this command queued nothing
    active = registry.active() if registry else []
    own = [r for r in active if not r.adopted]
    taken = [r for r in active if r.adopted and r.launched]
    for run in own + taken:
        run.cancel()
    for run in own + taken:
        run.wait(CANCEL_WAIT_S)
    said = ", ".join([f"run {r.run_id} {_how_it_ended(r)}" for r in own]
                     + [f"run {r.run_id} (taken over from a process that ended) {_how_it_ended(r)}" for r in taken])
    if left := sum(1 for r in active if r.adopted and not r.launched):
        said += f"{'; ' if said else ''}{left} run(s) taken over stay queued for the next process that opens the store"
    how = "interrupted" if signum == signal.SIGINT else "terminated"
    print(f"\r{how}: {said or 'no run of this command was queued'}\033[K", file=sys.stderr)
    return 128 + signum  # what a shell reports for a command ended by that signal: 130 for Ctrl-C, 143 for SIGTERM


def _how_it_ended(run) -> str:
    if not run.done:
        return f"asked to stop, not stopped after {CANCEL_WAIT_S:.0f} s"
    if run.record is None or run.record.error_kind == "cancelled":
        return "cancelled"
    return "had finished" if run.record.status == "finished" else f"had ended ({run.record.error_kind})"


def _main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


def count_between(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number from `low` to `high`, else refused in a sentence (`list --limit` of 20 digits
    ended in SQLite's OverflowError traceback; `calibrate --runs -3` queued 7 runs without a word, and 500 would have
    queued 500 at once)."""
    def count(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{cut_echoes(repr(text))} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value if abs(value) < 10**12 else 'that number'} is outside "
                                             f"{low:,}-{high:,}")
        return value
    return count


def build_parser() -> argparse.ArgumentParser:
    """The command line's parser (bench/model_sweep.py reads its run flags with it too)."""
    parser = Parser(prog="python -m tcore", description=__doc__)
    common = Parser(add_help=False)
    common.add_argument("--db", default=None,
                        help="run store (default: $COMPILE_LAB_DB or ~/.local/share/compile-lab/runs.sqlite)")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", parents=[common], help="run one experiment: eager against compiled",
                         description=default_words(), formatter_class=argparse.RawTextHelpFormatter)
    add_spec_args(run)
    run.add_argument("--timeout", type=float, default=None, help="stop the run after this many seconds")
    run.add_argument("--json", action="store_true", help="print the stored record as JSON")
    run.add_argument("--quiet", action="store_true", help="no live progress line")
    run.set_defaults(func=cmd_run)

    ls = sub.add_parser("list", parents=[common], help="stored runs, newest first")
    ls.add_argument("--limit", type=count_between(1, 10**9), default=None, help="the newest this many")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_list)

    show = sub.add_parser("show", parents=[common], help="one stored run")
    show.add_argument("run_id")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=cmd_show)

    models = sub.add_parser("models", help="the models --model takes: built-ins and SOURCE:NAME")
    models.add_argument("source", nargs="?", help="builtin, torchvision, timm, hf, diffusers or file")
    models.add_argument("pattern", nargs="?", help="a case-insensitive substring, or a glob such as 'convnext*'")
    models.set_defaults(func=cmd_models)

    cal = sub.add_parser("calibrate", parents=[common], help="reruns of reference settings: the spread between fresh "
                         "processes this machine shows, which the headlines' intervals then use")
    cal.add_argument("--runs", type=count_between(2, CALIBRATE_MOST_RUNS), default=5,
                     help="fresh runs of each reference, 2-20 (default 5; a kind of run with one reference gets 7, "
                          "enough to replace its default)")
    cal.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    cal.set_defaults(func=cmd_calibrate)

    store = sub.add_parser("store", help="the run store's file: set a damaged one aside")
    store_sub = store.add_subparsers(dest="store_command", required=True)
    aside = store_sub.add_parser("set-aside", parents=[common], help="keep a damaged run store aside, renamed, so that "
                                 "the lab starts a new, empty one", description=cmd_set_aside.__doc__)
    aside.set_defaults(func=cmd_set_aside)

    ladder.add_command(sub, [common], _open_store)
    return parser
