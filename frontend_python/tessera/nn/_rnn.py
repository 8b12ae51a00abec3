"""The engine under nn.RNN / LSTM / GRU: layers and directions over one sequence layout.

A sequence is always handled as PyTorch's packed layout: `data` holds the time steps one after
another, step t holding the first batch_sizes[t] sequences (sorted longest first). A padded batch
is the special case of one length. Time splits into segments where the batch size is constant;
each segment of each layer and direction is one `_rnn_layer` call (oneDNN's RNN primitive on the
CPU, cuDNN's on CUDA, every step of the segment in one call), or, for dtypes and devices without that kernel, a
loop of per-step cells built from ordinary operators (which autograd and every device support).
A direction running right to left visits the segments last to first, starting each newly active
sequence from its initial state, which is how a packed sequence's reverse direction begins at
each sequence's own last step.
"""
import tessera
from tessera import _C
from tessera.nn import functional as F

MODES = {"RNN_TANH": 0, "RNN_RELU": 1, "LSTM": 2, "GRU": 3}
GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def segments(batch_sizes):
    """[(t_begin, t_end, batch, row_offset)] for runs of equal batch size."""
    out = []
    t, row, T = 0, 0, len(batch_sizes)
    while t < T:
        b = batch_sizes[t]
        end = t
        while end < T and batch_sizes[end] == b:
            end += 1
        out.append((t, end, b, row))
        row += (end - t) * b
        t = end
    return out


# The devices whose plugin runs _rnn_layer itself: the CPU (oneDNN) and CUDA (cuDNN).
_FUSED_DEVICES = ("cpu", "cuda")


def _fused_ok(mode, x, weights, proj):
    device = x.device.type
    return (device in _FUSED_DEVICES and x.dtype == tessera.float32 and not proj
            and all(w is None or (w.dtype == tessera.float32 and w.device.type == device) for w in weights))


# ---- per-step cells from ordinary operators (the composite path; also RNNCell and friends)

def rnn_cell(x_proj, h, w_hh, b_hh, relu):
    pre = x_proj + F.linear(h, w_hh, b_hh)
    return tessera.relu(pre) if relu else tessera.tanh(pre)


def lstm_cell(x_proj, h, c, w_hh, b_hh, w_hr=None):
    gates = x_proj + F.linear(h, w_hh, b_hh)
    i, f, g, o = gates.chunk(4, -1)
    c = tessera.sigmoid(f) * c + tessera.sigmoid(i) * tessera.tanh(g)
    h = tessera.sigmoid(o) * tessera.tanh(c)
    if w_hr is not None:
        h = F.linear(h, w_hr)
    return h, c


def gru_cell(x_proj, h, w_hh, b_hh):
    xr, xz, xn = x_proj.chunk(3, -1)
    hr, hz, hn = F.linear(h, w_hh, b_hh).chunk(3, -1)
    r = tessera.sigmoid(xr + hr)
    z = tessera.sigmoid(xz + hz)
    n = tessera.tanh(xn + r * hn)
    return (1 - z) * n + z * h


def _composite_segment(mode, x, h, c, w_ih, w_hh, b_ih, b_hh, w_hr, reverse):
    """x [len, b, I] -> (out [len, b, H_out], h, c), one step at a time."""
    x_proj = F.linear(x, w_ih, b_ih)  # every step's input projection in one matrix product
    steps = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
    outs = [None] * x.shape[0]
    for t in steps:
        if mode == "LSTM":
            h, c = lstm_cell(x_proj[t], h, c, w_hh, b_hh, w_hr)
        elif mode == "GRU":
            h = gru_cell(x_proj[t], h, w_hh, b_hh)
        else:
            h = rnn_cell(x_proj[t], h, w_hh, b_hh, mode == "RNN_RELU")
        outs[t] = h
    return tessera.stack(outs, 0), h, c


def _fused_segment(mode, x, h, c, w_ih, w_hh, b_ih, b_hh, reverse, train):
    out, h, cy, _ = _C.call_op("_rnn_layer", (x, w_ih, w_hh, b_ih, b_hh, h, c, MODES[mode], reverse, train), {})
    return out, h, (cy if mode == "LSTM" else None)


def run_direction(mode, data, batch_sizes, h0, c0, weights, reverse, train, fused):
    """One layer, one direction over packed `data` [rows, I]: (out [rows, H_out], h_n, c_n) with
    h_n/c_n [B, H] holding each sequence's final state."""
    w_ih, w_hh, b_ih, b_hh, w_hr = weights
    segs = segments(batch_sizes)
    if not segs:  # no time steps: the state passes through
        h_out = w_hr.shape[0] if w_hr is not None else w_hh.shape[1]
        return data.new_zeros((0, h_out)), h0, c0
    outs = [None] * len(segs)
    h, c = h0[:0], (c0[:0] if c0 is not None else None)
    finals_h, finals_c = [], []  # forward direction: states of sequences as they end
    for k, (t0, t1, b, row) in (reversed(list(enumerate(segs))) if reverse else enumerate(segs)):
        if reverse:  # newly active sequences start from their initial state
            h = tessera.cat([h, h0[h.shape[0]:b]], 0) if h.shape[0] < b else h
            if c is not None:
                c = tessera.cat([c, c0[c.shape[0]:b]], 0) if c.shape[0] < b else c
        else:  # sequences past their end keep their final state
            if h.shape[0] == 0:
                h, c = h0[:b], (c0[:b] if c0 is not None else None)
            elif h.shape[0] > b:
                finals_h.append(h[b:])
                h = h[:b]
                if c is not None:
                    finals_c.append(c[b:])
                    c = c[:b]
        x = data[row:row + (t1 - t0) * b].reshape(t1 - t0, b, data.shape[-1])
        if fused:
            out, h, c = _fused_segment(mode, x, h, c, w_ih, w_hh, b_ih, b_hh, reverse, train)
        else:
            out, h, c = _composite_segment(mode, x, h, c, w_ih, w_hh, b_ih, b_hh, w_hr, reverse)
        outs[k] = out.reshape((t1 - t0) * b, out.shape[-1])
    if not reverse:
        finals_h.append(h)
        h = tessera.cat(finals_h[::-1], 0) if len(finals_h) > 1 else h
        if c is not None:
            finals_c.append(c)
            c = tessera.cat(finals_c[::-1], 0) if len(finals_c) > 1 else c
    out = tessera.cat(outs, 0) if len(outs) > 1 else outs[0]
    return out, h, c


def run(mode, data, batch_sizes, hx, cx, flat_weights, num_layers, bidirectional, dropout, training, proj_size):
    """All layers and directions. hx/cx [layers * dirs, B, H]; returns (out [rows, dirs * H_out],
    h_n, c_n or None)."""
    dirs = 2 if bidirectional else 1
    per = 5 if proj_size else 4
    grad = tessera.is_grad_enabled()
    hs, cs = [], []
    layer_in = data
    for layer in range(num_layers):
        outs = []
        for d in range(dirs):
            k = layer * dirs + d
            ws = list(flat_weights[k * per:(k + 1) * per])
            if not proj_size:
                ws.append(None)
            fused = _fused_ok(mode, layer_in, ws[:4], proj_size)
            train = grad and (layer_in.requires_grad or any(w is not None and w.requires_grad for w in ws)
                              or hx.requires_grad or (cx is not None and cx.requires_grad))
            out, h, c = run_direction(mode, layer_in, batch_sizes, hx[k], cx[k] if cx is not None else None, ws,
                                      d == 1, train, fused)
            outs.append(out)
            hs.append(h)
            cs.append(c)
        layer_in = tessera.cat(outs, -1) if dirs == 2 else outs[0]
        if dropout and training and layer < num_layers - 1:
            layer_in = F.dropout(layer_in, dropout, True)
    h_n = tessera.stack(hs, 0)
    c_n = tessera.stack(cs, 0) if mode == "LSTM" else None
    return layer_in, h_n, c_n
