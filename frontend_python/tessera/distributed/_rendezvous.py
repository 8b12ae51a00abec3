"""init_method URLs (env://, tcp://host:port, file:///path) -> (store, rank, world_size), as torch's
rendezvous handlers read them."""
import os
from urllib.parse import parse_qs, urlparse

from ._store import FileStore, TCPStore


def _int_from(name, value, where):
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: {name} must be an integer, got {value!r}") from None


def _query(url):
    return {k: v[-1] for k, v in parse_qs(url.query).items()}


def _rank_and_size(rank, world_size, query, where):
    if rank == -1 and "rank" in query:
        rank = _int_from("rank", query["rank"], where)
    if world_size == -1 and "world_size" in query:
        world_size = _int_from("world_size", query["world_size"], where)
    if rank < 0:
        raise ValueError(f"{where}: rank must be given (argument or ?rank=) and >= 0, got {rank}")
    if world_size < 1:
        raise ValueError(f"{where}: world_size must be given (argument or ?world_size=) and >= 1, got {world_size}")
    if rank >= world_size:
        raise ValueError(f"{where}: rank {rank} is not in a world of size {world_size}")
    return rank, world_size


def _env(name, where):
    value = os.environ.get(name)
    if value is None:
        raise ValueError(f"Error initializing torch.distributed using env:// rendezvous: environment variable "
                         f"{name} expected, but not set ({where})")
    return value


def rendezvous(init_method, rank, world_size, timeout):
    """Returns (store, rank, world_size) for an init_method URL."""
    url = urlparse(init_method)
    query = _query(url)
    if url.scheme == "env":
        if rank == -1:
            rank = _int_from("RANK", _env("RANK", "the rank"), "env://")
        if world_size == -1:
            world_size = _int_from("WORLD_SIZE", _env("WORLD_SIZE", "the world size"), "env://")
        host = _env("MASTER_ADDR", "the store's address")
        port = _int_from("MASTER_PORT", _env("MASTER_PORT", "the store's port"), "env://")
        rank, world_size = _rank_and_size(rank, world_size, {}, "env://")
        return _tcp_store(host, port, rank, world_size, timeout), rank, world_size
    if url.scheme == "tcp":
        if not url.hostname or url.port is None:
            raise ValueError(f"tcp:// init_method needs a host and a port (tcp://host:port), got {init_method!r}")
        rank, world_size = _rank_and_size(rank, world_size, query, init_method)
        # Gloo finds the interface that reaches the master through MASTER_ADDR, as with env://.
        os.environ.setdefault("MASTER_ADDR", url.hostname)
        return _tcp_store(url.hostname, url.port, rank, world_size, timeout), rank, world_size
    if url.scheme == "file":
        path = url.path
        if not path:
            raise ValueError(f"file:// init_method needs a path (file:///tmp/rendezvous), got {init_method!r}")
        rank, world_size = _rank_and_size(rank, world_size, query, init_method)
        store = FileStore(path, world_size)
        store.set_timeout(timeout)
        return store, rank, world_size
    raise ValueError(f"init_process_group: no rendezvous handler for {url.scheme}:// (init_method={init_method!r}); "
                     "expected env://, tcp:// or file://")


def _tcp_store(host, port, rank, world_size, timeout):
    return TCPStore(host, port, world_size, is_master=(rank == 0), timeout=timeout, wait_for_workers=True)
