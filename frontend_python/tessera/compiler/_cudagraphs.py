"""mode="reduce-overhead" (and "max-autotune", or options={"triton.cudagraphs": True}): a
compiled graph whose tensors are on a CUDA device replays all of its kernels as one CUDA graph
(ts.cuda.CUDAGraph), so a call costs the guard check, the input copies and one launch instead of
a launch per kernel.

Per input size: the first call runs the compiled kernels as they are (a warm-up: NVRTC builds,
cuBLAS and cuDNN set themselves up, none of which may happen inside a capture); the next one
captures them into a graph on private copies of the inputs (the parameters and buffers the graph
reads are captured in place: their addresses do not change). Every later call copies its inputs
into those copies, replays the graph, writes back the inputs the function writes, and returns
copies of the outputs.

Where PyTorch differs: its outputs are the graph's own buffers, overwritten by the next replay
(an error when read after that); here they are fresh tensors (one device copy each), so nothing
a caller holds changes under it, and cudagraph_mark_step_begin has nothing to mark.

Not captured (the compiled kernels launch one by one, as mode="default"): graphs with an input
off the GPU (PyTorch skips those too), training graphs (the forward/backward pair is one autograd
node whose saved tensors would live in the graph's pool: not done yet), and a graph whose capture
failed (one warning with the runtime's reason; a random operator, a synchronisation)."""
import warnings

import tessera

def wants_cuda_graphs(mode, options):
    if mode in ("reduce-overhead", "max-autotune"):
        return True
    return bool((options or {}).get("triton.cudagraphs", False))


def wrap(run, capture, example_inputs):
    """`run` replayed as a CUDA graph when the graph allows it, else `run` itself."""
    tensors = [x for x in example_inputs if isinstance(x, tessera.Tensor)]
    if not tensors or any(x.device.type != "cuda" for x in tensors):
        return run
    devices = {x.device.index or 0 for x in tensors}
    if len(devices) != 1 or len(getattr(run, "graphs", ())) != 1:  # several devices; a forward/backward pair
        return run
    mutated = sorted({position for position, _ in capture.ir.get("mutated_inputs", [])})
    return CUDAGraphRunner(run, mutated, devices.pop())


class _Captured:
    __slots__ = ("graph", "inputs", "outputs")

    def __init__(self, graph, inputs, outputs):
        self.graph, self.inputs, self.outputs = graph, inputs, outputs


class CUDAGraphRunner:
    """The compiled callable (inputs -> list of outputs) with one CUDA graph per input size."""

    def __init__(self, run, mutated_positions, device_index=0):
        self._run = run
        self._device = device_index  # the warm-up and the capture run with it current
        self._mutated = mutated_positions
        self._captured = {}   # input sizes -> _Captured
        self._warmed = set()  # input sizes whose warm-up call ran
        self.failure = None   # why the capture failed (then the kernels launch one by one)
        for name in ("fuses", "graphs", "rebuild", "handle", "compiler"):  # what callers read off `run`
            if hasattr(run, name):
                setattr(self, name, getattr(run, name))

    @staticmethod
    def _sizes(inputs):
        return tuple(tuple(x.shape) if isinstance(x, tessera.Tensor) else None for x in inputs)

    def __call__(self, *inputs):
        if self.failure is not None:
            return self._run(*inputs)
        sizes = self._sizes(inputs)
        captured = self._captured.get(sizes)
        if captured is None:
            if sizes not in self._warmed:
                self._warmed.add(sizes)
                return self._warm_up(inputs)
            captured = self._capture(inputs)
            if captured is None:
                return self._run(*inputs)
            self._captured[sizes] = captured
        for static, x in zip(captured.inputs, inputs):
            if isinstance(x, tessera.Tensor):
                static.copy_(x)
        captured.graph.replay()
        for k in self._mutated:  # the function writes these inputs: the replay wrote the copies
            inputs[k].copy_(captured.inputs[k])
        return [out.clone() for out in captured.outputs]

    def _warm_up(self, inputs):
        """Runs the kernels on the stream the capture will use (libraries keep state per
        stream), ordered after the caller's work and before what the caller queues next."""
        with tessera.cuda.device(self._device):
            side = tessera.cuda.graph.capture_stream_for(None)
            current = tessera.cuda.current_stream()
            side.wait_stream(current)
            with side:
                outputs = self._run(*inputs)
            current.wait_stream(side)
        return outputs

    def _capture(self, inputs):
        statics = [tessera.empty_strided(x.size(), x.stride(), dtype=x.dtype, device=x.device).copy_(x)
                   if isinstance(x, tessera.Tensor) else x for x in inputs]
        graph = tessera.cuda.CUDAGraph()
        try:
            with tessera.cuda.device(self._device), tessera.cuda.graph(graph):
                outputs = self._run(*statics)
        except RuntimeError as e:
            self.failure = str(e)
            warnings.warn("ts.compile(mode='reduce-overhead'): the compiled graph could not be captured as a CUDA "
                          f"graph, so its kernels are launched one by one: {e}", stacklevel=4)
            return None
        return _Captured(graph, statics, list(outputs))
