"""The process of a local GCS or Azure store (`ackfold_dev.emulated`): the emulator, started
as its child on a port of its own, behind `ackfold_dev.store_proxy` with that store's
rewrites (`ackfold_dev.gcs.xml_api`, `ackfold_dev.azurite.blob_api`).

Run by `ackfold_dev.gcs.LocalGCS` and `ackfold_dev.azurite.LocalAzure` as
`python -m ackfold_dev.proxy_process --kind gcs|azure --port N --root DIR --program P`.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from ackfold_dev.ports import free_port
from ackfold_dev.store_proxy import Rewrite, StoreProxy, serve, wait_for_port


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ackfold_dev.proxy_process")
    parser.add_argument("--kind", choices=("gcs", "azure"), required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--root", type=Path, required=True, help="where the emulator keeps data")
    parser.add_argument("--program", required=True, help="the emulator's executable")
    parser.add_argument(
        "--in-memory", action="store_true", help="keep the data in memory (GCS), not in --root"
    )
    args = parser.parse_args(argv)
    upstream_port = free_port()
    while upstream_port == args.port:  # not bound by anyone yet: the kernel may hand it out
        upstream_port = free_port()
    public = f"{args.host}:{args.port}"
    args.root.mkdir(parents=True, exist_ok=True)
    log = (args.root / f"{args.kind}-emulator.log").open("ab")
    rewrite: Rewrite | None
    if args.kind == "gcs":
        from ackfold_dev.gcs import emulator_command, xml_api

        rewrite = xml_api
    else:
        from ackfold_dev.azurite import blob_api, emulator_command

        rewrite = blob_api
    command = emulator_command(args.program, args.root, upstream_port, public, args.in_memory)
    upstream = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for_port(upstream, upstream_port, command[0], timeout=120)
    except BaseException:
        upstream.kill()
        raise
    return serve(StoreProxy(upstream_port, rewrite), args.host, args.port, upstream)


if __name__ == "__main__":
    sys.exit(main())
