"""The launchers of a multi-node run, as one group: they meet on a TCPStore that node 0's launcher
serves at MASTER_PORT + 1 (the workers' own store is rank 0's, at MASTER_PORT), start every attempt
together and end it together. A worker failing on one node stops the workers of every node at once
(not when their next collective times out), and --max-restarts restarts the whole group, as
torchrun's agents do.

Per attempt n the store holds: attempt/n/ready (launchers that started it, counted),
attempt/n/go (set when all have), attempt/n/failed (the first failure, "node K: rank R ..."),
attempt/n/done (launchers whose workers all succeeded, counted) and attempt/n/left (launchers
that saw everyone done and exit; node 0, which serves the store, waits for them)."""
import datetime
import time

from ._store import TCPStore

DEFAULT_JOIN_TIMEOUT = 600.0  # seconds a launcher waits for the others (torch's join_timeout)
LEAVE_TIMEOUT = 10.0  # how long node 0 keeps serving the store for launchers still reading it


class NodeGroupError(RuntimeError):
    pass


class NodeGroup:
    def __init__(self, config, join_timeout=DEFAULT_JOIN_TIMEOUT):
        self.nnodes, self.node_rank = config.nnodes, config.node_rank
        self.join_timeout = join_timeout
        self.address = f"{config.master_addr}:{config.master_port + 1}"
        try:
            self.store = TCPStore(config.master_addr, config.master_port + 1, config.nnodes,
                                  is_master=config.node_rank == 0,
                                  timeout=datetime.timedelta(seconds=join_timeout), wait_for_workers=False)
        except Exception as e:
            raise NodeGroupError(f"node {self.node_rank}: the launchers' store at {self.address} is unreachable: "
                                 f"{e}") from None

    def _call(self, what, fn, *args):
        try:
            return fn(*args)
        except Exception as e:  # the store's server (node 0's launcher) is gone, or timed out
            raise NodeGroupError(f"node {self.node_rank}: {what} through the launchers' store at {self.address} "
                                 f"failed: {e}") from None

    def start(self, attempt):
        """Blocks until every node's launcher starts `attempt` (NodeGroupError past join_timeout)."""
        key = f"attempt/{attempt}"
        if self._call("joining", self.store.add, f"{key}/ready", 1) == self.nnodes:
            self._call("joining", self.store.set, f"{key}/go", "1")
        self._call(f"waiting for the other {self.nnodes - 1} node(s) to start attempt {attempt}",
                   self.store.wait, [f"{key}/go"], datetime.timedelta(seconds=self.join_timeout))

    def fail(self, attempt, text):
        """Tells the other nodes this attempt failed here (the first failure named is kept)."""
        self._call("reporting a failure", self.store.compare_set, f"attempt/{attempt}/failed", "", text)

    def failure(self, attempt):
        """The failure another node reported for `attempt`, or None."""
        key = f"attempt/{attempt}/failed"
        if not self._call("checking the other nodes", self.store.check, [key]):
            return None
        return self._call("checking the other nodes", self.store.get, key).decode()

    def finish(self, attempt, monitor_interval, stop_requested):
        """After this node's workers all succeeded: waits until every node's did (returns None) or
        one failed (returns its failure text). Node 0 then serves the store until the others left."""
        key = f"attempt/{attempt}"
        self._call("reporting success", self.store.add, f"{key}/done", 1)
        while True:
            failed = self.failure(attempt)
            if failed is not None:
                return failed
            if self._call("waiting for the other nodes", self.store.add, f"{key}/done", 0) >= self.nnodes:
                break
            if stop_requested():
                return None
            time.sleep(monitor_interval)
        if self.node_rank != 0:
            self._call("leaving", self.store.add, f"{key}/left", 1)
            return None
        deadline = time.monotonic() + LEAVE_TIMEOUT
        while time.monotonic() < deadline and self.store.add(f"{key}/left", 0) < self.nnodes - 1:
            time.sleep(monitor_interval)
        return None
