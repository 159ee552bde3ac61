"""``clustertwin ui``: the local web app."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated

import typer

from ..errors import InputError
from ._common import app, console_err


@app.command("ui")
def ui_cmd(
    host: Annotated[str, typer.Option("--host", help="Address to listen on (default: this machine only).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port.")] = 8050,
    db: Annotated[Path, typer.Option("--db", help="Results database the app stores plans/sweeps in and browses.")] = Path("clustertwin-results.db"),
) -> None:
    """Local web app: pick or upload a design and a model, run estimate / plan / compare / sweep, see
    the plots, browse the results database, download YAML, JSON and the HTML report."""
    from ..web import serve

    if not 0 < port < 65536:
        raise InputError(f"--port must be 1-65535, got {port}")
    try:
        local = ipaddress.ip_address(host).is_loopback
    except ValueError:
        local = host == "localhost"
    if not local:
        console_err.print(f"warning: listening on {host}: anyone who can reach this address can use the app "
                          "(it has no login); the default --host 127.0.0.1 keeps it on this machine")
    console_err.print(f"ClusterTwin UI on http://{host}:{port}/ (results in {db}); Ctrl-C stops it")
    serve(host=host, port=port, db=db)
