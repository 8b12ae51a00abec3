"""Stores: TCPStore (server and clients, across processes), FileStore, HashStore, PrefixStore;
their timeouts, a port in use, a server that goes away, a torn file, and a server fed garbage."""
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from datetime import timedelta

import pytest

import tessera.distributed as dist
from dist_harness import free_port, package_path


def _exercise(store):
    store.set("a", "1")
    store.set("b", b"\x00\xffbytes")
    assert store.get("a") == b"1" and store.get("b") == b"\x00\xffbytes"
    assert store.add("n", 5) == 5 and store.add("n", -2) == 3 and store.get("n") == b"3"
    assert store.compare_set("c", "", "first") == b"first"          # absent + expected "" -> set
    assert store.compare_set("c", "wrong", "second") == b"first"    # mismatch -> unchanged
    assert store.compare_set("c", "first", "second") == b"second"
    assert store.check(["a", "b"]) and not store.check(["a", "missing"])
    store.wait(["a", "b"])
    assert store.delete_key("a") and not store.delete_key("a") and not store.check(["a"])
    before = store.num_keys()
    store.set("z", "x")
    assert store.num_keys() == before + 1


def _wait_times_out(store, name):
    start = time.monotonic()
    with pytest.raises(dist.DistStoreError, match=rf"{name}.*timed out after 300 ms waiting for key \[never\]"):
        store.wait(["never"], timedelta(milliseconds=300))
    assert time.monotonic() - start < 5
    store.set_timeout(timedelta(milliseconds=200))
    with pytest.raises(dist.DistStoreError, match="never"):
        store.get("never")


def test_hash_store():
    s = dist.HashStore()
    _exercise(s)
    _wait_times_out(s, "HashStore")
    # a waiter is released by a set from another thread
    threading.Timer(0.2, lambda: s.set("later", "v")).start()
    s.set_timeout(timedelta(seconds=10))
    assert s.get("later") == b"v"


def test_prefix_store_namespaces_keys():
    base = dist.HashStore()
    p = dist.PrefixStore("job", base)
    _exercise(p)
    p.set("k", "v")
    assert base.get("job/k") == b"v" and not base.check(["k"])
    with pytest.raises(TypeError, match="must be a Store"):
        dist.PrefixStore("x", object())


def test_tcp_store_master_and_clients_in_process():
    master = dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=timedelta(seconds=10))
    client = dist.TCPStore("127.0.0.1", master.port, timeout=timedelta(seconds=10))
    _exercise(client)
    assert master.get("b") == b"\x00\xffbytes"
    _wait_times_out(client, "TCPStore")
    # a client blocked in get() is released by another client's set
    client.set_timeout(timedelta(seconds=10))
    threading.Timer(0.2, lambda: master.set("late", "v")).start()
    assert client.get("late") == b"v"
    # after a timed-out wait, the connection is made again and still answers
    assert client.get("late") == b"v"


def test_tcp_store_port_in_use_names_the_port():
    master = dist.TCPStore("127.0.0.1", 0, is_master=True)
    with pytest.raises(dist.DistNetworkError, match=rf"port {master.port}.*[Aa]ddress already in use"):
        dist.TCPStore("127.0.0.1", master.port, is_master=True)


def test_tcp_store_client_without_server_times_out():
    port = free_port()
    start = time.monotonic()
    with pytest.raises(dist.DistNetworkError, match=rf"could not connect to the server at 127.0.0.1:{port} within 500 ms"):
        dist.TCPStore("127.0.0.1", port, timeout=timedelta(milliseconds=500))
    assert time.monotonic() - start < 5


def test_tcp_store_master_waits_for_workers():
    port = free_port()
    start = time.monotonic()
    with pytest.raises(dist.DistStoreError, match="waiting for clients: 1 of 3 joined"):
        dist.TCPStore("127.0.0.1", port, world_size=3, is_master=True, timeout=timedelta(milliseconds=500))
    assert time.monotonic() - start < 5


def _run(code, env=None):
    return subprocess.Popen([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=package_path(), **(env or {})),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_tcp_store_across_processes_and_server_that_goes_away():
    port = free_port()
    server = _run(f"""
import time, tessera.distributed as dist
from datetime import timedelta
s = dist.TCPStore("127.0.0.1", {port}, world_size=2, is_master=True, timeout=timedelta(seconds=30))
s.set("from_master", "hello")
s.wait(["from_client"])
print("server saw", s.get("from_client").decode(), flush=True)
time.sleep(60)
""")
    try:
        client = dist.TCPStore("127.0.0.1", port, world_size=2, timeout=timedelta(seconds=30))
        assert client.get("from_master") == b"hello"
        client.set("from_client", "hi")
        assert server.stdout.readline().strip() == "server saw hi"
        server.kill()
        server.wait(timeout=10)
        start = time.monotonic()
        with pytest.raises(dist.DistStoreError, match="(lost the server|could not connect)"):
            client.set_timeout(timedelta(seconds=2))
            client.get("never_set")
        assert time.monotonic() - start < 10
    finally:
        server.kill()
        server.communicate(timeout=10)


def test_tcp_store_server_survives_garbage():
    master = dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=timedelta(seconds=5))
    master.set("k", "v")
    payloads = [
        b"\xff\x00\x00\x00\x00",                          # an unknown command
        b"\x01" + struct.pack("<I", 2**31),               # too many arguments
        b"\x01" + struct.pack("<I", 1) + struct.pack("<I", 2**31 + 5),  # an argument over the limit
        b"\x01" + struct.pack("<I", 2) + struct.pack("<I", 3) + b"ab",  # truncated, then the client leaves
        b"\x03" + struct.pack("<I", 2) + struct.pack("<I", 1) + b"k" + struct.pack("<I", 3) + b"abc",  # bad add delta
        os.urandom(4096),
    ]
    for p in payloads:
        with socket.create_connection(("127.0.0.1", master.port), timeout=5) as s:
            s.sendall(p)
            s.shutdown(socket.SHUT_WR)
            s.settimeout(5)
            try:
                s.recv(100)  # the server closes a malformed connection (or answers nothing)
            except (socket.timeout, ConnectionResetError):
                pass
    # the server still serves everyone else
    client = dist.TCPStore("127.0.0.1", master.port, timeout=timedelta(seconds=5))
    assert client.get("k") == b"v"
    client.set("k2", "v2")
    assert master.get("k2") == b"v2"


def test_file_store_shared_by_processes_and_removed_at_the_end(tmp_path):
    path = str(tmp_path / "store")
    other = _run(f"""
import tessera.distributed as dist
from datetime import timedelta
s = dist.FileStore({path!r}, 2)
s.set_timeout(timedelta(seconds=30))
s.set("from_other", "x")
assert s.get("from_me") == b"y"
for _ in range(200):
    s.add("counter", 1)
""")
    s = dist.FileStore(path, 2)
    s.set_timeout(timedelta(seconds=30))
    assert s.get("from_other") == b"x"
    s.set("from_me", "y")
    for _ in range(200):
        s.add("counter", 1)
    out, err = other.communicate(timeout=60)
    assert other.returncode == 0, err
    assert s.get("counter") == b"400"  # flock serialises the two writers: no lost update
    _exercise(s)
    _wait_times_out(s, "FileStore")
    del s
    import gc
    gc.collect()
    assert not os.path.exists(path)  # both of the world's stores are gone: the file is removed


def test_file_store_ignores_a_torn_tail(tmp_path):
    path = str(tmp_path / "store")
    s = dist.FileStore(path)
    s.set("good", "value")
    with open(path, "ab") as f:  # a writer died after half a record
        f.write(b"\x01" + struct.pack("<I", 4) + b"ba")
    fresh = dist.FileStore(path)
    assert fresh.get("good") == b"value" and not fresh.check(["bad"])
    fresh.set("after", "ok")  # the torn tail is cut off before appending
    assert s.get("after") == b"ok" and s.get("good") == b"value"


def test_elastic_record_writes_the_error_file(tmp_path, monkeypatch):
    from tessera.distributed.elastic.multiprocessing.errors import record
    path = tmp_path / "error.json"
    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(path))

    @record
    def main(x):
        if x:
            raise ValueError("bad batch")
        return 7

    assert main(0) == 7 and not path.exists()
    with pytest.raises(ValueError, match="bad batch"):
        main(1)
    import json
    data = json.loads(path.read_text())
    assert data["message"]["message"] == "ValueError: bad batch"
    assert "raise ValueError" in data["message"]["extraInfo"]["py_callstack"]
