"""Recurrent layers: RNN, LSTM, GRU (stacked, bidirectional, batch_first, packed sequences,
LSTM projections) and their single-step cells, with torch's parameters, shapes and errors.
The sequence engine is tessera/nn/_rnn.py."""
import math
import numbers
import warnings

import tessera
from tessera.nn import _rnn, init
from tessera.nn.modules.module import Module
from tessera.nn.parameter import Parameter
from tessera.nn.utils.rnn import PackedSequence

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]


def _check_state_rank(hx, rank, is_lstm):
    """torch's message when the initial state's rank does not match a batched / unbatched input."""
    states = tuple(hx) if is_lstm else (hx,)
    if all(h.dim() == rank for h in states):
        return
    kind = "unbatched 2-D" if rank == 2 else "batched 3-D"
    if is_lstm:
        got = ", ".join(f"{h.dim()}-D" for h in states)
        raise RuntimeError(f"For {kind} input, hx and cx should also be {rank}-D but got ({got}) tensors")
    raise RuntimeError(f"For {kind} input, hx should also be {rank}-D but got {hx.dim()}-D tensor")


def _permute_state(h, permutation):
    return h if permutation is None else h.index_select(1, permutation)


class RNNBase(Module):
    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        if mode not in _rnn.MODES:
            raise ValueError(f"Unrecognized RNN mode: {mode}")
        if (not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1 or isinstance(dropout, bool)):
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an "
                             "element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and num_layers={num_layers}")
        if not isinstance(hidden_size, int):
            raise TypeError(f"hidden_size should be of type int, got: {type(hidden_size).__name__}")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        gate_size = _rnn.GATES[mode] * hidden_size
        dirs = 2 if bidirectional else 1
        real_hidden = proj_size if proj_size > 0 else hidden_size
        self._flat_weights_names = []
        self._all_weights = []
        factory = dict(device=device, dtype=dtype)
        for layer in range(num_layers):
            for direction in range(dirs):
                layer_input = input_size if layer == 0 else real_hidden * dirs
                suffix = "_reverse" if direction == 1 else ""
                params = [("weight_ih", (gate_size, layer_input)), ("weight_hh", (gate_size, real_hidden))]
                if bias:
                    params += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size > 0:
                    params.append(("weight_hr", (proj_size, hidden_size)))
                names = []
                for kind, shape in params:
                    name = f"{kind}_l{layer}{suffix}"
                    setattr(self, name, Parameter(tessera.empty(shape, **factory)))
                    names.append(name)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size)
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    @property
    def _flat_weights(self):
        return [getattr(self, name) for name in self._flat_weights_names]

    @property
    def all_weights(self):
        return [[getattr(self, name) for name in names] for names in self._all_weights]

    def flatten_parameters(self):
        """torch compacts cuDNN's weights here; tessera's kernels read the parameters as they are."""

    def _layer_weights(self):
        """Per layer and direction: [w_ih, w_hh, b_ih, b_hh(, w_hr)] with None for absent biases."""
        out = []
        for names in self._all_weights:
            ws = [getattr(self, n) for n in names]
            if not self.bias:
                ws = ws[:2] + [None, None] + ws[2:]
            out.extend(ws)
        return out

    def _check_input(self, input, batch_sizes):
        if not tessera.is_floating_point(input) and not input.is_complex():
            raise ValueError(f"input must have the type {self._flat_weights[0].dtype}, got type {input.dtype}")
        expected_dim = 2 if batch_sizes is not None else 3
        if input.dim() != expected_dim:
            raise RuntimeError(f"input must have {expected_dim} dimensions, got {input.dim()}")
        if self.input_size != input.shape[-1]:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {input.shape[-1]}")

    def _check_hidden(self, hx, expected, msg="Expected hidden size {}, got {}"):
        if tuple(hx.shape) != tuple(expected):
            raise RuntimeError(msg.format(tuple(expected), list(hx.shape)))

    def _state_size(self, batch, cell=False):
        dirs = 2 if self.bidirectional else 1
        size = self.hidden_size if (cell or not self.proj_size) else self.proj_size
        return (self.num_layers * dirs, batch, size)

    def forward(self, input, hx=None):
        is_lstm = self.mode == "LSTM"
        packed = isinstance(input, PackedSequence)
        batched = True
        if packed:
            data, batch_sizes, sorted_indices, unsorted_indices = input
            batch = int(batch_sizes[0])
            sizes = [int(b) for b in batch_sizes.tolist()]
        else:
            name = type(self).__name__
            if input.dim() not in (2, 3):
                raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.dim()}D instead")
            batched = input.dim() == 3
            if hx is not None:
                _check_state_rank(hx, input.dim(), is_lstm)
            if not batched:  # (L, H_in): the batch dim goes where batch_first says, as torch
                input = input.unsqueeze(0 if self.batch_first else 1)
                if hx is not None:
                    hx = tuple(h.unsqueeze(1) for h in hx) if is_lstm else hx.unsqueeze(1)
            if self.batch_first:
                input = input.transpose(0, 1)
            sorted_indices = unsorted_indices = None
            T, batch = input.shape[0], input.shape[1]
            self._check_input(input, None)
            sizes = [batch] * T
            data = input.reshape(T * batch, input.shape[-1])
        if packed:
            self._check_input(data, batch_sizes)
        if hx is None:
            zeros = dict(dtype=data.dtype, device=data.device)
            h0 = tessera.zeros(self._state_size(batch), **zeros)
            c0 = tessera.zeros(self._state_size(batch, cell=True), **zeros) if is_lstm else None
        else:
            if is_lstm:
                if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                    raise RuntimeError("LSTM: expected hx to be a tuple (h_0, c_0)")
                h0, c0 = _permute_state(hx[0], sorted_indices), _permute_state(hx[1], sorted_indices)
                self._check_hidden(h0, self._state_size(batch), "Expected hidden[0] size {}, got {}")
                self._check_hidden(c0, self._state_size(batch, cell=True), "Expected hidden[1] size {}, got {}")
            else:
                h0, c0 = _permute_state(hx, sorted_indices), None
                self._check_hidden(h0, self._state_size(batch))
        out, h_n, c_n = _rnn.run(self.mode, data, sizes, h0, c0, self._layer_weights(), self.num_layers,
                                 self.bidirectional, self.dropout, self.training, self.proj_size)
        h_n = _permute_state(h_n, unsorted_indices)
        c_n = _permute_state(c_n, unsorted_indices) if c_n is not None else None
        if packed:
            output = PackedSequence(out, batch_sizes, sorted_indices, unsorted_indices)
        else:
            output = out.reshape(len(sizes), batch, out.shape[-1])
            if self.batch_first:
                output = output.transpose(0, 1)
            if not batched:
                output = output.squeeze(0 if self.batch_first else 1)
                h_n = h_n.squeeze(1)
                c_n = c_n.squeeze(1) if c_n is not None else None
        return (output, (h_n, c_n)) if is_lstm else (output, h_n)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s


class RNN(RNNBase):
    """Elman RNN: h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh) (or relu)."""

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if len(args) > 3:  # torch's positional order: input_size, hidden_size, num_layers, nonlinearity, ...
            nonlinearity = args[3]
            args = args[:3] + args[4:]
        if nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        self.nonlinearity = nonlinearity
        super().__init__(mode, *args, **kwargs)


class LSTM(RNNBase):
    """LSTM with PyTorch's gates (i, f, g, o), optional projection of h (proj_size)."""

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)


class GRU(RNNBase):
    """GRU with PyTorch's formula: n = tanh(W_in x + b_in + r * (W_hn h + b_hn))."""

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)


class RNNCellBase(Module):
    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        factory = dict(device=device, dtype=dtype)
        self.weight_ih = Parameter(tessera.empty((num_chunks * hidden_size, input_size), **factory))
        self.weight_hh = Parameter(tessera.empty((num_chunks * hidden_size, hidden_size), **factory))
        if bias:
            self.bias_ih = Parameter(tessera.empty((num_chunks * hidden_size,), **factory))
            self.bias_hh = Parameter(tessera.empty((num_chunks * hidden_size,), **factory))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def _prepare(self, input, hx, n_states):
        name = type(self).__name__
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D instead")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.shape[-1]} expected {self.input_size}")
        batched = input.dim() == 2
        if not batched:
            input = input.unsqueeze(0)
        if hx is None:
            zeros = tessera.zeros((input.shape[0], self.hidden_size), dtype=input.dtype, device=input.device)
            states = (zeros,) * n_states
        else:
            states = tuple(hx) if n_states == 2 else (hx,)
            for h in states:
                if h.dim() != input.dim() and not (not batched and h.dim() == 1):
                    raise RuntimeError(f"{name}: Expected hidden to be {2 if batched else 1}D, got {h.dim()}D instead")
            if not batched:
                states = tuple(h.unsqueeze(0) for h in states)
            for h in states:
                if h.shape[0] != input.shape[0]:
                    raise RuntimeError(f"Input batch size {input.shape[0]} doesn't match hidden0 batch size "
                                       f"{h.shape[0]}")
                if h.shape[1] != self.hidden_size:
                    raise RuntimeError(f"hidden0 has inconsistent hidden_size: got {h.shape[1]}, expected "
                                       f"{self.hidden_size}")
        return input, states, batched

    def _input_projection(self, input):
        from tessera.nn import functional as F
        return F.linear(input, self.weight_ih, self.bias_ih)


class RNNCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        input, (h,), batched = self._prepare(input, hx, 1)
        h = _rnn.rnn_cell(self._input_projection(input), h, self.weight_hh, self.bias_hh, self.nonlinearity == "relu")
        return h if batched else h.squeeze(0)


class LSTMCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        input, (h, c), batched = self._prepare(input, hx, 2)
        h, c = _rnn.lstm_cell(self._input_projection(input), h, c, self.weight_hh, self.bias_hh)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        input, (h,), batched = self._prepare(input, hx, 1)
        h = _rnn.gru_cell(self._input_projection(input), h, self.weight_hh, self.bias_hh)
        return h if batched else h.squeeze(0)
