"""Command line: ``python -m dprl list | run <id> [--scale paper] | bench | env``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from dprl.experiments import SCALES, run


def _list(_: argparse.Namespace) -> int:
    from dprl.experiments.report import listing

    print(listing())
    return 0


def _run(args: argparse.Namespace) -> int:
    result = run(args.experiment, args.scale, args.results_dir, resume=not args.restart,
                 jobs=args.jobs)
    print(f"wrote {args.experiment} ({args.scale}): {result.provenance['n_trials']} trials, "
          f"{result.provenance['wall_time_s']:.1f} s of compute")
    return 0


def _bench(args: argparse.Namespace) -> int:
    from dprl.bench import run_benchmarks

    run_benchmarks(args.name, quick=args.quick)
    return 0


def _env(_: argparse.Namespace) -> int:
    from dprl.floating_point import shell_assignments

    print(shell_assignments())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m dprl`` and the ``dprl`` script."""
    from dprl.experiments.runner import RESULTS_DIR

    parser = argparse.ArgumentParser(prog="python -m dprl", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="every experiment, its settings and result status"
                        ).set_defaults(func=_list)
    runner = commands.add_parser("run", help="compute an experiment's result with provenance")
    runner.add_argument("experiment")
    runner.add_argument("--scale", choices=SCALES, default="smoke")
    runner.add_argument("--results-dir", default=RESULTS_DIR)
    runner.add_argument("--restart", action="store_true",
                        help="discard finished trials of an interrupted run")
    runner.add_argument("--jobs", type=int, default=1,
                        help="batches computed at once in separate processes (same result)")
    runner.set_defaults(func=_run)
    bench = commands.add_parser("bench", help="speed benchmarks, as ratios to a reference")
    bench.add_argument("name", nargs="*", help="benchmarks to run (default: all)")
    bench.add_argument("--quick", action="store_true", help="small sizes, for tests")
    bench.set_defaults(func=_bench)
    commands.add_parser("env", help="the floating-point settings that make results the same "
                        "bits on every x86-64-v3 machine, as NAME=value words for env"
                        ).set_defaults(func=_env)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
