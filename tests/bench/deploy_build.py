"""Deploy build time: a release build of every function from a warm dependency cache, as
`sam build` or `cargo lambda build --release` pays it after a change to the code (python3).

    python3 tests/bench/deploy_build.py                  # the release profile (what sam build uses)
    python3 tests/bench/deploy_build.py --profile dist   # fat LTO, one codegen unit

First, untimed, it builds every function and `hello-lambda` in the profile, so the dependencies
are compiled and cached (from nothing, that is the printed warm-up), then `rp-shared`'s tools,
which the cold-start script runs. Then it touches `shared/domain/src/lib.rs`, so every crate of
the workspace rebuilds (the domain is at the bottom of the stack), and times one `cargo build`
of all the functions. Prints the total, and each binary's size against hello-world's. For init
against hello-world, run `tests/bench/cold_start.py --no-build --binaries target/<profile>`
afterwards (it needs moto's server: `.ci/cache/bench/bin/python`, as its docstring says)."""

import argparse
import os
import pathlib
import statistics
import subprocess
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profile", default="release", help="cargo profile (default: release)")
    args = parser.parse_args()
    functions = sorted(p.name for p in (ROOT / "functions").iterdir())
    packages = [a for f in functions for a in ("-p", f)]
    cargo = ["cargo", "build", "-q", "--profile", args.profile]
    env = dict(os.environ, CARGO_TERM_COLOR="never")

    started = time.monotonic()
    subprocess.run(cargo + packages + ["-p", "hello-lambda"], cwd=ROOT, check=True, env=env)
    print(f"warm-up (untimed; dependencies included when not cached): {time.monotonic() - started:.0f} s")
    # `rp-admin` (rp-shared's), which the cold-start script seeds the table with.
    subprocess.run(cargo + ["-p", "rp-shared"], cwd=ROOT, check=True, env=env)

    (ROOT / "shared" / "domain" / "src" / "lib.rs").touch()
    started = time.monotonic()
    subprocess.run(cargo + packages, cwd=ROOT, check=True, env=env)
    took = time.monotonic() - started

    out = ROOT / "target" / args.profile
    hello = (out / "hello-lambda").stat().st_size / 1e6
    sizes = {f: (out / f).stat().st_size / 1e6 for f in functions}
    print(f"\nprofile `{args.profile}`: {len(functions)} functions rebuilt in {took / 60:.1f} min "
          f"({took / len(functions):.0f} s a function) on {os.cpu_count()} cores\n")
    print("| function | size (MB) | × hello-world |")
    print("|---|---|---|")
    for f in ["hello-lambda", *functions]:
        size = hello if f == "hello-lambda" else sizes[f]
        print(f"| {f} | {size:.1f} | {size / hello:.2f} |")
    values = sorted(sizes.values())
    print(f"\nsizes: {values[0]:.1f}-{values[-1]:.1f} MB, median {statistics.median(values):.1f} MB, "
          f"{sum(values):.0f} MB in all; hello-world {hello:.1f} MB")


if __name__ == "__main__":
    main()
