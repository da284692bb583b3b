"""A local, read-only web page to look at a dataset: ``python -m shardify.view DATASET``.

Serves one page (HTML, CSS and JavaScript inline: it works offline) and a small JSON and
PNG API over :class:`shardify.Dataset`, with the standard library's HTTP server. It binds
to the loopback interface unless told otherwise, answers GET alone, and never writes to
the dataset. docs/viewing.md shows it.

    python -m shardify.view fmnist                  # prints http://127.0.0.1:8765/
    python -m shardify.view fmnist --port 0         # any free port
    python -m shardify.view s3://sets/brain --cache-limit 2G   # through the bounded local cache

A remote dataset (``s3://``, ``http(s)://``) is read as shardify.Dataset and the Loader read
it, through the local cache that ``--cache-dir`` and ``--cache-limit`` (or
``$SHARDIFY_CACHE_DIR`` and ``$SHARDIFY_CACHE_LIMIT``) bound; docs/remote.md.

From Python: ``server = shardify.view.serve(dataset, port=0)``; ``server.url``;
``threading.Thread(target=server.serve_forever).start()``; ``server.shutdown()``.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import re
import socket
import sys
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from . import _view_page
from ._dataset import Dataset
from ._view_data import BadRequest, DatasetView, NotFound
from ._view_render import MAX_SIDE, RenderError

DEFAULT_PORT = 8765
PRESETS = ("nnunet", "mednist")
MAX_PAGE = 500  # samples per page of /api/samples
MAX_DRAWS = 8  # augmentations per /api/augment picture
MAX_BINS = 256  # bins of an /api/histogram
_INTEGER = re.compile(r"-?[0-9]{1,12}")
# A number as JavaScript writes a double (up to 17 significant digits: the page sends its window so).
_NUMBER = re.compile(r"-?([0-9]{1,24}(\.[0-9]{0,24})?|\.[0-9]{1,24})([eE][-+]?[0-9]{1,3})?")


class _HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class _Params:
    """The query of a request, each parameter read once and checked: missing, repeated, path-like
    or malformed values, and names the endpoint does not take, are 400s."""

    def __init__(self, query: str, allowed: tuple[str, ...]) -> None:
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
        self._values: dict[str, str] = {}
        for name, value in pairs:
            if name not in allowed:
                raise _HttpError(400, f"unknown parameter {name!r}; this endpoint takes {list(allowed)}")
            if name in self._values:
                raise _HttpError(400, f"parameter {name!r} given twice")
            if "/" in value or "\\" in value or ".." in value or "\0" in value:
                raise _HttpError(400, f"parameter {name!r} looks like a path ({value!r}); it is a name or a number")
            self._values[name] = value

    def text(self, name: str) -> str | None:
        value = self._values.get(name)
        if value == "":
            raise _HttpError(400, f"parameter {name!r} is empty")
        return value

    def integer(self, name: str, default: int | None, lo: int, hi: int) -> int | None:
        value = self.text(name)
        if value is None:
            return default
        if not _INTEGER.fullmatch(value):
            raise _HttpError(400, f"parameter {name!r} must be an integer, got {value!r}")
        number = int(value)
        if not lo <= number <= hi:
            raise _HttpError(400, f"parameter {name!r} must be {lo}..{hi}, got {number}")
        return number

    def window(self) -> tuple[float, float] | None:
        value = self.text("window")
        if value is None:
            return None
        parts = value.split(",")
        if len(parts) != 2 or not all(_NUMBER.fullmatch(p.strip()) for p in parts):
            raise _HttpError(400, f"parameter 'window' must be two numbers lo,hi, got {value!r}")
        lo, hi = (float(p) for p in parts)
        if not lo < hi:
            raise _HttpError(400, f"parameter 'window' needs lo < hi, got {lo:g},{hi:g}")
        return lo, hi

    def flag(self, name: str, default: bool) -> bool:
        value = self.text(name)
        if value is None:
            return default
        if value not in ("0", "1"):
            raise _HttpError(400, f"parameter {name!r} must be 0 or 1, got {value!r}")
        return value == "1"


def _overview(view: DatasetView, params: _Params, _):
    return view.overview()


def _samples(view: DatasetView, params: _Params, _):
    return view.page(params.text("split"), params.text("label"), params.integer("offset", 0, 0, 1 << 40),
                     params.integer("limit", 100, 1, MAX_PAGE))


def _sample(view: DatasetView, params: _Params, index: int):
    return view.sample(view.check_index(index))


def _image(view: DatasetView, params: _Params, index: int):
    view.check_index(index)
    return view.picture(index, params.text("field"), params.integer("axis", 0, 0, 2),
                        params.integer("slice", None, 0, 1 << 31), params.integer("size", None, 8, MAX_SIDE),
                        params.window(), params.integer("channel", None, 0, 1 << 16), params.flag("mask", True),
                        params.flag("aspect", True))


def _histogram(view: DatasetView, params: _Params, _):
    return view.histogram(params.text("field"), params.integer("bins", 64, 8, MAX_BINS))


def _augment(view: DatasetView, params: _Params, index: int):
    view.check_index(index)
    preset = params.text("preset") or "nnunet"
    if preset not in PRESETS:
        raise _HttpError(400, f"parameter 'preset' must be one of {list(PRESETS)}, got {preset!r}")
    draws = params.integer("draws", 4, 1, MAX_DRAWS)
    size = params.integer("size", 160, 16, 512)
    seed = params.integer("seed", 0, 0, (1 << 31) - 1)
    try:
        return view.augmentation(index, preset, draws, size, seed)
    except ImportError as e:
        raise _HttpError(400, f"the augmentation preview needs torch, which cannot be imported here ({e})") from e
    except ValueError as e:  # a preset that does not fit the sample
        raise _HttpError(400, f"preset {preset!r} cannot augment sample {index}: {e}") from e


# path pattern -> (handler, parameters it takes, content type)
_ROUTES: list[tuple[re.Pattern, Callable, tuple[str, ...], str]] = [
    (re.compile(r"/api/overview"), _overview, (), "application/json"),
    (re.compile(r"/api/samples"), _samples, ("split", "label", "offset", "limit"), "application/json"),
    (re.compile(r"/api/histogram"), _histogram, ("field", "bins"), "application/json"),
    (re.compile(r"/api/sample/([0-9]{1,15})"), _sample, (), "application/json"),
    (re.compile(r"/api/image/([0-9]{1,15})\.png"), _image,
     ("field", "axis", "slice", "size", "window", "channel", "mask", "aspect"), "image/png"),
    (re.compile(r"/api/augment/([0-9]{1,15})\.png"), _augment, ("preset", "draws", "size", "seed"), "image/png"),
]


class _Handler(BaseHTTPRequestHandler):
    server: "ViewServer"
    server_version = "shardify-view"
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802  (http.server's name)
        try:
            self._check_host()
            status, body, kind = self._route()
        except _HttpError as e:
            status, body, kind = e.status, _json({"error": str(e), "status": e.status}), "application/json"
        except Exception as e:  # noqa: BLE001  (the page gets a message, never a traceback)
            status, body, kind = 500, _json({"error": f"{type(e).__name__}: {e}", "status": 500}), "application/json"
        self._send(status, body, kind)

    def _route(self) -> tuple[int, bytes, str]:
        parts = urllib.parse.urlsplit(self.path)
        if parts.path in ("/", "/index.html"):
            if parts.query:
                raise _HttpError(400, "the page takes no parameters")
            return 200, _view_page.PAGE.encode(), "text/html; charset=utf-8"
        for pattern, handler, allowed, kind in _ROUTES:
            match = pattern.fullmatch(parts.path)
            if match is None:
                continue
            params = _Params(parts.query, allowed)
            index = int(match.group(1)) if match.groups() else None
            try:
                result = handler(self.server.view, params, index)
            except NotFound as e:
                raise _HttpError(404, str(e)) from e
            except (BadRequest, RenderError) as e:
                raise _HttpError(400, str(e)) from e
            return 200, result if isinstance(result, bytes) else _json(result), kind
        raise _HttpError(404, f"no such page {parts.path!r}; the API is /api/overview, /api/samples, "
                              "/api/histogram, /api/sample/I, /api/image/I.png, /api/augment/I.png")

    def _check_host(self) -> None:
        """On loopback, a Host that is not a loopback name is refused: a page elsewhere that made
        its own name resolve to 127.0.0.1 cannot read the dataset through the user's browser."""
        if not self.server.loopback:
            return
        host = (self.headers.get("Host") or "").rsplit(":", 1)[0].strip("[]")
        if host == "localhost" or _is_loopback(host):
            return
        raise _HttpError(403, f"host {host!r} is not a loopback name; open the URL the server printed")

    def _send(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store" if kind == "application/json" else "max-age=600")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'unsafe-inline'; "
                                                    "script-src 'unsafe-inline'; connect-src 'self'")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self) -> None:  # noqa: N802
        self.do_GET()

    def _read_only(self) -> None:
        self._send(405, _json({"error": "the viewer is read-only: GET only", "status": 405}), "application/json")

    do_POST = do_PUT = do_DELETE = do_PATCH = _read_only  # noqa: N815

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002  (http.server's name)
        if self.server.verbose:
            super().log_message(format, *args)


def _json(value) -> bytes:
    return json.dumps(value, allow_nan=False).encode()


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class ViewServer(ThreadingHTTPServer):
    """The viewer's HTTP server over one dataset; ``url`` is where it answers."""

    daemon_threads = True

    def __init__(self, view: DatasetView, bind: str, port: int, verbose: bool = False) -> None:
        if ":" in bind:
            self.address_family = socket.AF_INET6
        super().__init__((bind, port), _Handler)
        self.view = view
        self.verbose = verbose
        self.loopback = _is_loopback(bind) or bind == "localhost"

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{'[' + host + ']' if ':' in host else host}:{port}/"


def serve(dataset: Dataset | str, port: int = DEFAULT_PORT, bind: str = "127.0.0.1", verbose: bool = False, *,
          cache_dir: str | None = None, cache_limit: int | str | None = None) -> ViewServer:
    """A ViewServer of ``dataset`` (a Dataset, or its path or s3:// or http(s):// location)
    bound to ``bind``:``port`` (0: any free port), not yet serving: call its
    ``serve_forever()``. A remote dataset is read through the local cache that
    ``cache_dir`` and ``cache_limit`` bound, as shardify.Dataset and the Loader read it
    (docs/remote.md); they do not apply to a Dataset given open."""
    if not isinstance(dataset, Dataset):
        dataset = Dataset(dataset, cache_dir=cache_dir, cache_limit=cache_limit)
    return ViewServer(DatasetView(dataset), bind, port, verbose)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shardify.view",
                                     description="A local, read-only web page to look at a shardify dataset.")
    parser.add_argument("dataset", metavar="DATASET", help="dataset directory, or its s3:// or http(s):// location")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: any free one)")
    parser.add_argument("--bind", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1: this machine alone; anything else lets "
                             "the network read the dataset)")
    parser.add_argument("--verbose", action="store_true", help="log every request on stderr")
    parser.add_argument("--cache-dir", metavar="DIR",
                        help="for an s3:// or http(s):// dataset: the folder shards are fetched into (default "
                             "$SHARDIFY_CACHE_DIR, else ~/.cache/shardify); the processes of a node share it")
    parser.add_argument("--cache-limit", metavar="SIZE",
                        help="for an s3:// or http(s):// dataset: the most bytes its cache holds, e.g. 20G "
                             "(default $SHARDIFY_CACHE_LIMIT, else the dataset's size, at most half the free space)")
    args = parser.parse_args(argv)
    if not 0 <= args.port <= 65535:
        parser.error(f"--port must be 0..65535, got {args.port}")
    try:
        server = serve(args.dataset, args.port, args.bind, args.verbose, cache_dir=args.cache_dir,
                       cache_limit=args.cache_limit)
    except (OSError, ValueError) as e:
        print(f"shardify.view: {e}", file=sys.stderr)
        return 2
    if not server.loopback:
        print(f"shardify.view: listening on {args.bind}: anyone who can reach it can read the dataset",
              file=sys.stderr)
    print(f"shardify.view: {server.view.dataset._shown} at {server.url} (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
