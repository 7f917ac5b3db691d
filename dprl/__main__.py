"""Command line: python -m dprl list | run <id> [--scale paper] | run --all | bench | env."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from dprl.experiments import SCALES, run
from dprl.paths import RESULTS_DIR

DESCRIPTION = """\
The experiments behind the book: list them with their results' status, run one
(or all, in dependency order) with provenance, time the benchmarks, print the
floating-point settings."""

RUN_DESCRIPTION = """\
Compute an experiment's trials in batches and write <id>.npz with its provenance
<id>.json (smoke scale: <id>.smoke.npz). Finished batches are kept under
<id>.partial/, so an interrupted run (Ctrl-C) resumes when the same command is
run again. With --all: every experiment, each after the results it reads.

The batches run one after another here; with --jobs N, on N worker processes of
this machine; with --scheduler (or DPRL_SCHEDULER), on the workers of a running
dask cluster; with --slurm N, on N Slurm jobs' workers. With --all on dask, the
batches of every experiment are submitted at once, each experiment's waiting for
the results it reads. Workers need this checkout's commit and the pinned floating
point (env $(python -m dprl env) dask worker ...); without the results folder on
a filesystem they share, the batches come back here to be saved. The clusters
started here (--jobs, --slurm) speak TLS with credentials made for the run, so
only its own processes connect; a local one listens on 127.0.0.1 only."""


class _Parser(argparse.ArgumentParser):
    """Errors in one line, ``prog: error: message``, exit status 2; ``lazy_epilog`` (a
    function) makes the epilog only when help is shown."""

    lazy_epilog: Callable[[], str] | None = None

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")

    def format_help(self) -> str:
        if self.lazy_epilog is not None:
            self.epilog = self.lazy_epilog()
        return super().format_help()


class _Formatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Each argument's default after its help (an argument without one, such as an optional
    positional, and an on/off flag, off unless given, show none); description and epilog
    printed as written."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


def _experiment_id(value: str) -> str:
    from dprl.experiments import all_experiments

    if value not in {experiment.id for experiment in all_experiments()}:
        raise argparse.ArgumentTypeError(
            f"unknown experiment {value!r} (python -m dprl list shows them all)")
    return value


def _positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {value!r}")
    return number


def _slurm_option(value: str) -> str:
    """A ``KEY=VALUE`` of ``--slurm-option``, checked (:func:`dprl.engine.slurm_options.slurm_option`)."""
    from dprl.engine.slurm_options import slurm_option

    try:
        slurm_option(value)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return value


def _results_folder(value: str) -> str:
    """A results folder to write to: a folder, or a path where one can be made."""
    if Path(value).exists() and not Path(value).is_dir():
        raise argparse.ArgumentTypeError(f"{value!r} is not a folder")
    return value


def _existing_results_folder(value: str) -> str:
    """A results folder to read: an existing folder."""
    if not Path(value).is_dir():
        raise argparse.ArgumentTypeError(f"{value!r} is not an existing folder")
    return value


def _benchmark_name(value: str) -> str:
    from dprl.bench import BENCHMARKS

    if value not in BENCHMARKS:
        raise argparse.ArgumentTypeError(
            f"unknown benchmark {value!r}; known: {', '.join(sorted(BENCHMARKS))}")
    return value


def _benchmark_listing() -> str:
    from dprl.bench import listing

    return "benchmarks:\n" + listing()


def _list(args: argparse.Namespace) -> int:
    from dprl.engine.report import listing

    print(listing(results_dir=args.results_dir))
    return 0


def _run(args: argparse.Namespace) -> int:
    from dprl.engine.dask_engine import WorkerLost
    from dprl.engine.dask_workers import WorkerRefused
    from dprl.engine.runner import Interrupted
    from dprl.engine.slurm import MissingExtra

    if (args.experiment is None) == (not args.all):
        args.parser.error("give one experiment id or --all")
    if args.remeasure and args.all:
        args.parser.error("--remeasure takes one experiment id")
    if args.slurm_option and args.slurm is None:
        args.parser.error("--slurm-option needs --slurm")
    workers = {"jobs": args.jobs, "scheduler": args.scheduler, "slurm": args.slurm,
               "shared_fs": False if args.no_shared_fs else None}
    try:
        with _slurm_settings(args.slurm_option or []):
            return _run_with(args, workers)
    except Interrupted as stopped:
        print(f"\ninterrupted: {stopped}", file=sys.stderr)
        return 130
    except (ValueError, FileNotFoundError, WorkerRefused, WorkerLost, ConnectionError,
            MissingExtra) as error:
        print(f"{args.parser.prog}: error: {error}", file=sys.stderr)
        return 1


def _slurm_settings(options: list[str]) -> contextlib.AbstractContextManager[Any]:
    """dask's configuration with the ``--slurm-option`` settings ``options`` in it
    (:func:`dprl.engine.slurm_options.slurm_config`), for the block."""
    if not options:
        return contextlib.nullcontext()
    import dask

    from dprl.engine.slurm_options import slurm_config

    return dask.config.set(slurm_config(options))


def _run_with(args: argparse.Namespace, workers: dict[str, Any]) -> int:
    """``run`` with the arguments ``args`` on the ``workers``, its exceptions left to
    :func:`_run`."""
    from dprl.engine.runner import remeasure

    if args.all:
        from dprl.engine.run_all import compute_table, run_all

        print(compute_table(run_all(args.scale, args.results_dir, resume=not args.restart,
                                    **workers)))
        return 0
    if args.remeasure:
        result = remeasure(args.experiment, args.scale, args.results_dir, **workers)
        print(f"{args.experiment} ({args.scale}): the same bits; recorded "
              f"{result.provenance['cpu_time_s']:.1f} CPU s")
        return 0
    result = run(args.experiment, args.scale, args.results_dir, resume=not args.restart,
                 **workers)
    print(f"wrote {args.experiment} ({args.scale}): {result.provenance['n_trials']} trials, "
          f"{result.provenance['wall_time_s']:.1f} s of compute "
          f"({result.provenance['cpu_time_s']:.1f} CPU s)")
    return 0


def _bench(args: argparse.Namespace) -> int:
    from dprl.bench import run_benchmarks

    run_benchmarks(args.name, quick=args.quick)
    return 0


def _env(_: argparse.Namespace) -> int:
    from dprl.floating_point import shell_assignments

    print(shell_assignments())
    return 0


def parser() -> argparse.ArgumentParser:
    """The command line's parser (its subcommands set ``func``)."""
    top = _Parser(prog="python -m dprl", description=DESCRIPTION, formatter_class=_Formatter)
    commands = top.add_subparsers(dest="command", required=True, metavar="command")
    lister = commands.add_parser("list", help="every experiment, its settings and result status",
                                 formatter_class=_Formatter)
    lister.add_argument("--results-dir", default=str(RESULTS_DIR), type=_existing_results_folder,
                        help="folder of the results whose status is shown")
    lister.set_defaults(func=_list)
    runner = commands.add_parser(
        "run", help="compute an experiment's result with provenance", formatter_class=_Formatter,
        description=RUN_DESCRIPTION)
    runner.add_argument("experiment", nargs="?", type=_experiment_id,
                        help="experiment id (python -m dprl list shows them)")
    runner.add_argument("--all", action="store_true",
                        help="every experiment, each after the results it reads; current "
                             "results are kept; ends with a table of compute times")
    runner.add_argument("--scale", choices=SCALES, default="smoke",
                        help="smoke: seconds, for tests; paper: the book's results")
    runner.add_argument("--results-dir", default=str(RESULTS_DIR), type=_results_folder,
                        help="folder the results are written to")
    runner.add_argument("--restart", action="store_true",
                        help="discard the finished batches of an interrupted run")
    runner.add_argument("--jobs", type=_positive_int, default=1,
                        help="batches computed at once, in that many worker processes of this "
                             "machine (a dask LocalCluster; the same result)")
    runner.add_argument("--scheduler", metavar="ADDRESS",
                        help="a running dask scheduler (tcp://host:port, or tls://host:port "
                             "with the credentials of dask's distributed.comm.tls config) whose "
                             "workers compute the batches (the same result); default: "
                             "$DPRL_SCHEDULER, if set")
    runner.add_argument("--slurm", type=_positive_int, metavar="WORKERS",
                        help="WORKERS single-threaded dask workers from this checkout in Slurm "
                             "jobs (as many a job as cores; needs dask-jobqueue: pip install "
                             "-e .[slurm]); settings from dask's jobqueue.slurm config and "
                             "--slurm-option; jobs near their walltime are replaced")
    runner.add_argument("--slurm-option", action="append", type=_slurm_option,
                        metavar="KEY=VALUE",
                        help="a setting of the Slurm jobs over dask's jobqueue.slurm config, "
                             "repeatable: partition, account, walltime (dask-jobqueue's "
                             "default: 00:30:00), memory (a job's), cores, processes, job-cpu, "
                             "job-mem, interface (scheduler and workers, e.g. ib0), "
                             "log-directory, local-directory, shared-temp-directory, "
                             "death-timeout, job-extra-directives (an #SBATCH line, added), "
                             "dashboard-address")
    runner.add_argument("--no-shared-fs", action="store_true",
                        help="the workers do not see the results folder: the batches come "
                             "back here to be saved (without it: ask the workers)")
    runner.add_argument("--remeasure", action="store_true",
                        help="recompute a current stored result, require the same bits and "
                             "record the compute in its sidecar (for results made before "
                             "CPU time was recorded)")
    runner.set_defaults(func=_run, parser=runner)
    bench = commands.add_parser("bench", help="speed benchmarks, as ratios to a reference",
                                formatter_class=_Formatter)
    bench.lazy_epilog = _benchmark_listing
    bench.add_argument("name", nargs="*", type=_benchmark_name,
                       help="benchmarks to run, from the list below (default: all)")
    bench.add_argument("--quick", action="store_true",
                       help="small sizes, each timed once, for tests (too small to decide the "
                       "speed goals)")
    bench.set_defaults(func=_bench)
    commands.add_parser("env", help="the floating-point settings that make results the same "
                        "bits on every x86-64-v3 machine, as NAME=value words for env",
                        formatter_class=_Formatter).set_defaults(func=_env)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m dprl`` and the ``dprl`` script; returns the exit status."""
    args = parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
