"""Stores: key-value stores that every rank reaches (torch.distributed's Store classes).

The stores live in C++ (libtessera-distributed): TCPStore's server is a thread of the process that
creates it with is_master=True, FileStore is a file guarded by flock, HashStore is in-process and
PrefixStore namespaces another store. Every blocking call has a timeout and raises DistStoreError
naming what it waited for.
"""
from datetime import timedelta

from .. import _C

_DEFAULT_STORE_TIMEOUT = timedelta(seconds=300)


def _as_timedelta(timeout, what):
    if timeout is None:
        return None
    if isinstance(timeout, timedelta):
        return timeout
    if isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
        return timedelta(seconds=timeout)
    raise TypeError(f"{what}: timeout must be a datetime.timedelta, got {type(timeout).__name__}")


class Store:
    """The store interface. Values are bytes; str values are stored as their UTF-8 bytes."""

    def __init__(self, impl):
        self._impl = impl

    def set(self, key, value):
        self._impl.set(key, value)

    def get(self, key):
        return self._impl.get(key)

    def add(self, key, amount):
        return self._impl.add(key, int(amount))

    def compare_set(self, key, expected_value, desired_value):
        return self._impl.compare_set(key, expected_value, desired_value)

    def check(self, keys):
        return self._impl.check(list(keys))

    def wait(self, keys, timeout=None):
        self._impl.wait(list(keys), _as_timedelta(timeout, "Store.wait"))

    def delete_key(self, key):
        return self._impl.delete_key(key)

    def num_keys(self):
        return self._impl.num_keys()

    def set_timeout(self, timeout):
        self._impl.set_timeout(_as_timedelta(timeout, "Store.set_timeout"))

    @property
    def timeout(self):
        return self._impl.timeout

    def __repr__(self):
        return f"{type(self).__name__}()"


class HashStore(Store):
    """A store inside one process (threads share it)."""

    def __init__(self):
        super().__init__(_C._hash_store())


class FileStore(Store):
    """A store in a file that the processes share (one machine or a shared file system). With
    world_size > 0 the file is removed once that many FileStores on it have been destroyed."""

    def __init__(self, file_name, world_size=-1):
        self.path = str(file_name)
        super().__init__(_C._file_store(self.path, int(world_size)))


class PrefixStore(Store):
    """Every key of `store` under `prefix` + "/"."""

    def __init__(self, prefix, store):
        if not isinstance(store, Store):
            raise TypeError(f"PrefixStore: store must be a Store, got {type(store).__name__}")
        self.underlying_store = store
        super().__init__(_C._prefix_store(str(prefix), store._impl))


class TCPStore(Store):
    """A store served over TCP. The process with is_master=True runs the server (on `port`; 0
    picks a free one, read back from .port) and every process, the master too, is a client.
    With world_size set and wait_for_workers, the master returns once that many stores joined."""

    def __init__(self, host_name, port, world_size=None, is_master=False, timeout=_DEFAULT_STORE_TIMEOUT,
                 wait_for_workers=True, multi_tenant=False, master_listen_fd=None, use_libuv=True):
        timeout = _as_timedelta(timeout, "TCPStore")
        if not isinstance(port, int) or isinstance(port, bool) or not (0 <= port <= 65535):
            raise ValueError(f"TCPStore: port must be an int in 0..65535, got {port!r}")
        super().__init__(_C._TCPStore(str(host_name), port, -1 if world_size is None else int(world_size),
                                      bool(is_master), timeout, bool(wait_for_workers)))

    @property
    def host(self):
        return self._impl.host

    @property
    def port(self):
        return self._impl.port

    def __repr__(self):
        return f"TCPStore(host={self.host!r}, port={self.port})"
