"""CUDA graphs, as torch.cuda.CUDAGraph / torch.cuda.graph: the kernels a region queues on the
current stream are captured once and replayed with a single launch, which removes the per-kernel
launch cost of the CPU side (the CUDA plugin's cuda::graph_* operators).

    g = ts.cuda.CUDAGraph()
    static_x = ts.randn(64, 128, device="cuda")
    model(static_x)                      # warm up first: libraries set themselves up outside the capture
    with ts.cuda.graph(g):
        static_y = model(static_x)
    static_x.copy_(new_batch)            # inputs go into the captured tensors ...
    g.replay()                           # ... and the outputs appear in the captured outputs

As in PyTorch: memory allocated during the capture comes from a private pool that stays the
graph's (graphs captured one after another may share one with `pool=`, if replayed in the same
order); a replay reads and writes the very tensors of the capture; work that is not allowed
during a capture (synchronising, reading device data on the host, copies from pageable host
memory) makes the capture fail with the runtime's reason. Random operators raise inside a
capture: their seed is taken on the host, so replays would repeat the numbers."""
import gc

from tessera import _C


def _ops():
    from tessera import cuda
    return cuda._require()


def graph_pool_handle():
    """A new memory pool id, to pass to several captures as `pool=` (torch.cuda.graph_pool_handle)."""
    return _ops().graph_pool_handle()


def is_current_stream_capturing():
    """Whether the current CUDA stream is capturing a graph (False without a device)."""
    from tessera import cuda
    ops = cuda._ops()
    return bool(ops is not None and ops.is_current_stream_capturing())


class CUDAGraph:
    """One captured graph (torch.cuda.CUDAGraph). capture_begin/capture_end bracket the work to
    capture on the current stream (`ts.cuda.graph` captures on a side stream for you, as torch
    does); replay() launches it on the current stream. `keep_graph` is accepted for torch's
    signature: the graph is always instantiated when the capture ends."""

    def __init__(self, keep_graph=False):
        self._id = None
        self._pool = None

    def capture_begin(self, pool=None, capture_error_mode="global"):
        if self._id is not None:
            raise RuntimeError("CUDAGraph.capture_begin: this graph already holds a capture; reset() it first")
        if capture_error_mode not in ("global", "thread_local", "relaxed"):
            raise ValueError("CUDAGraph.capture_begin: capture_error_mode must be 'global', 'thread_local' or "
                             f"'relaxed', got {capture_error_mode!r}")
        if pool is not None and (not isinstance(pool, int) or pool < 1):
            raise TypeError(f"CUDAGraph.capture_begin: pool must be a handle from graph_pool_handle(), got {pool!r}")
        self._id = _ops().graph_capture_begin(pool or 0, capture_error_mode)
        self._pool = _ops().graph_pool(self._id)

    def capture_end(self):
        if self._id is None:
            raise RuntimeError("CUDAGraph.capture_end: no capture was begun")
        try:
            self.nodes = _ops().graph_capture_end(self._id)
        except BaseException:
            self._id = None  # the plugin has released the failed capture
            raise

    def replay(self):
        if self._id is None:
            raise RuntimeError("CUDAGraph.replay: the graph holds no capture (capture it first)")
        _ops().graph_replay(self._id)

    def reset(self):
        """Releases the graph and its hold on the memory pool; a capture underway is abandoned."""
        if self._id is not None:
            graph_id, self._id = self._id, None
            _ops().graph_reset(graph_id)

    def pool(self):
        """The graph's memory pool id: another capture given it shares this graph's memory."""
        if self._pool is None:
            raise RuntimeError("CUDAGraph.pool: the graph holds no capture")
        return self._pool

    def __del__(self):
        try:
            self.reset()
        except Exception:  # interpreter shutdown: the plugin may be gone
            pass


class graph:
    """Captures the block into `cuda_graph` (torch.cuda.graph): synchronises, frees what the
    caches hold, makes `stream` (by default one side stream shared by all captures) current,
    and captures. An exception inside abandons the capture and propagates."""

    default_capture_streams = {}  # device index -> the side stream captures there share

    def __init__(self, cuda_graph, pool=None, stream=None, capture_error_mode="global"):
        self.cuda_graph = cuda_graph
        self.pool = pool
        self.capture_stream = graph.capture_stream_for(stream)
        self.capture_error_mode = capture_error_mode

    @staticmethod
    def capture_stream_for(stream):
        """`stream`, or (None) the side stream every capture on the current device shares."""
        if stream is not None:
            return stream
        from tessera import cuda
        index = cuda.current_device()
        if index not in graph.default_capture_streams:
            graph.default_capture_streams[index] = _C.Stream(_C.device("cuda", index))
        return graph.default_capture_streams[index]

    def __enter__(self):
        from tessera import cuda
        cuda.synchronize()
        gc.collect()
        cuda.empty_cache()
        self.capture_stream.__enter__()
        try:
            self.cuda_graph.capture_begin(self.pool, capture_error_mode=self.capture_error_mode)
        except BaseException:
            self.capture_stream.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None:
                self.cuda_graph.capture_end()
            else:
                self.cuda_graph.reset()
        finally:
            self.capture_stream.__exit__(exc_type, exc, tb)
        return False
