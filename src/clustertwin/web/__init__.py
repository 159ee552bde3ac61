"""``clustertwin ui``: a local web app over ``clustertwin.api`` and the HTML report (optional extra
``web``: ``pip install "clustertwin[web]"``)."""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError


def _need() -> None:
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise InputError("the web app needs the optional packages fastapi, uvicorn and python-multipart",
                         hint='install them with `pip install "clustertwin[web]"`') from None


def create_app(**kw):
    """The ASGI app (see ``web/app.py``)."""
    _need()
    from .app import create_app as _create

    return _create(**kw)


def serve(*, host: str = "127.0.0.1", port: int = 8050, db: str | Path = "clustertwin-results.db") -> None:
    """Run the app with uvicorn until interrupted."""
    _need()
    import uvicorn

    uvicorn.run(create_app(db=db), host=host, port=port, log_level="warning", access_log=False)


__all__ = ["create_app", "serve"]
