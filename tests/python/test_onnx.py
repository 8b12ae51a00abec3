"""ts.onnx.export: models exported from ts.export's graph, checked with onnx's full checker and
run in onnxruntime against eager tessera."""
import io
import math

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import tessera as ts  # noqa: E402
import tessera.nn as nn  # noqa: E402
import tessera.nn.functional as F  # noqa: E402

ATOL = RTOL = 1e-4


def _session(model_proto):
    return ort.InferenceSession(model_proto.SerializeToString(), providers=["CPUExecutionProvider"])


def _outputs(value):
    return list(value) if isinstance(value, (tuple, list)) else [value]


def check_export(model, args, *, kwargs=None, **options):
    """Exports, runs the full checker and compares onnxruntime with eager tessera; returns the
    ONNXProgram."""
    kwargs = kwargs or {}
    program = ts.onnx.export(model, args, None, kwargs=kwargs, **options)
    onnx.checker.check_model(program.model_proto, full_check=True)
    sess = _session(program.model_proto)
    tensors = [a for a in list(args) + list(kwargs.values()) if isinstance(a, ts.Tensor)]
    feeds = {i.name: t.numpy() for i, t in zip(sess.get_inputs(), tensors)}
    got = sess.run(None, feeds)
    want = _outputs(model(*args, **kwargs))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = w.numpy()
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, atol=ATOL, rtol=RTOL)
    return program


def op_types(program):
    return [n.op_type for n in program.model_proto.graph.node]


# --- models --------------------------------------------------------------------------------------
class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 32)
        self.bn = nn.BatchNorm1d(32)
        self.fc2 = nn.Linear(32, 3)

    def forward(self, x):
        return self.fc2(F.relu(self.bn(self.fc1(x))))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1, groups=2, bias=False)
        self.bn2 = nn.BatchNorm2d(16)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 5)

    def forward(self, x):
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        x = F.relu(self.bn2(self.conv2(x)))
        return self.fc(ts.flatten(self.gap(x), 1))


class Block(nn.Module):
    """A pre-norm transformer block: causal attention by masked_fill and softmax, GELU MLP."""

    def __init__(self, dim=16, heads=2, block_size=8, sdpa=False):
        super().__init__()
        self.heads, self.sdpa = heads, sdpa
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc, self.out = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
        self.register_buffer("mask", ts.tril(ts.ones(block_size, block_size)).view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // self.heads))
            att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
            y = F.softmax(att, dim=-1) @ v
        x = x + self.proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab=50, dim=16, block_size=8, sdpa=False):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, dim), nn.Embedding(block_size, dim)
        self.blocks = nn.ModuleList([Block(dim, 2, block_size, sdpa) for _ in range(2)])
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(ts.arange(0, T, dtype=ts.long))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def _trained_stats(model, *shape):
    """Running statistics other than 0 and 1, so that eval batch norm is not an identity."""
    model.train()
    with ts.no_grad():
        for _ in range(3):
            model(ts.randn(*shape) * 2 + 1)
    return model.eval()


# --- the three model families --------------------------------------------------------------------
def test_mlp_with_batchnorm1d_in_eval():
    model = _trained_stats(MLP(), 16, 8)
    program = check_export(model, (ts.randn(4, 8),))
    assert "BatchNormalization" in op_types(program)
    names = {i.name for i in program.model_proto.graph.initializer}
    assert {"fc1.weight", "bn.running_mean", "bn.running_var"} <= names
    assert "bn.num_batches_tracked" not in names  # unused by the graph


def test_small_cnn():
    model = _trained_stats(CNN(), 4, 3, 16, 16)
    program = check_export(model, (ts.randn(2, 3, 16, 16),))
    ops = op_types(program)
    for op in ("Conv", "BatchNormalization", "MaxPool", "GlobalAveragePool", "Relu"):
        assert op in ops


@pytest.mark.parametrize("sdpa", [False, True])
def test_gpt_with_causal_attention(sdpa):
    program = check_export(GPT(sdpa=sdpa).eval(), (ts.randint(0, 50, (2, 8)),))
    ops = op_types(program)
    assert "LayerNormalization" in ops and "Softmax" in ops and "Where" in ops


class MaskedAttention(nn.Module):
    """Attention under a key-padding mask given as an input (bool, True = attend)."""

    def forward(self, q, k, v, keep):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None, None, :])


def test_attention_with_a_mask_input():
    """The fused kernel's mask: added to the scores; a query whose keys are all hidden (batch 1
    here) gives zeros in onnxruntime as in eager, not NaN."""
    q, k, v = ts.randn(2, 2, 5, 4), ts.randn(2, 2, 7, 4), ts.randn(2, 2, 7, 4)
    keep = ts.tensor([[True] * 5 + [False] * 2, [False] * 7])
    program = check_export(MaskedAttention(), (q, k, v, keep))
    assert "Softmax" in op_types(program)


def test_dynamic_batch_runs_at_other_sizes():
    cases = [(MLP(), (4, 8), "x"), (CNN(), (4, 3, 16, 16), "x"), (GPT(), None, "idx")]
    for model, shape, name in cases:
        model = model.eval()
        example = ts.randint(0, 50, (4, 8)) if shape is None else ts.randn(*shape)
        program = ts.onnx.export(model, (example,), None, input_names=[name], output_names=["y"],
                                 dynamic_axes={name: {0: "batch"}, "y": {0: "batch"}})
        graph = program.model_proto.graph
        assert graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
        assert graph.output[0].type.tensor_type.shape.dim[0].dim_param == "batch"
        onnx.checker.check_model(program.model_proto, full_check=True)
        sess = _session(program.model_proto)
        for batch in (2, 7, 16):
            x = ts.randint(0, 50, (batch, 8)) if shape is None else ts.randn(batch, *shape[1:])
            got = sess.run(None, {name: x.numpy()})[0]
            np.testing.assert_allclose(got, model(x).numpy(), atol=ATOL, rtol=RTOL)


def test_dynamic_batch_and_sequence():
    # T feeds arange, the mask's slice and the views: all computed from the input's shape.
    model = GPT().eval()
    program = ts.onnx.export(model, (ts.randint(0, 50, (3, 5)),), None,
                             dynamic_axes={"idx": {0: "batch", 1: "seq"}}, do_constant_folding=False)
    dims = program.model_proto.graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_param for d in dims] == ["batch", "seq"]
    onnx.checker.check_model(program.model_proto, full_check=True)
    sess = _session(program.model_proto)
    for batch, seq in ((2, 8), (7, 3), (16, 6)):
        idx = ts.randint(0, 50, (batch, seq))
        got = sess.run(None, {"idx": idx.numpy()})[0]
        np.testing.assert_allclose(got, model(idx).numpy(), atol=ATOL, rtol=RTOL)


def test_list_dynamic_axes_and_reshape_by_batch():
    class Fold(nn.Module):
        def forward(self, x):
            B, T, C = x.shape
            return (x.reshape(B * T, C).softmax(-1).view(B, T * C), x.var(dim=0), x.std(dim=(0, 1)), x[B - 1],
                    x.narrow(0, 1, B - 1), ts.zeros(B, 2) + ts.ones(1, C).expand(B, C).sum(1, keepdim=True),
                    x.clone().flatten(0, 1)[B:])

    program = ts.onnx.export(Fold(), (ts.randn(4, 3, 5),), None, dynamic_axes={"x": [0]})
    assert program.model_proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "x_dynamic_axes_1"
    onnx.checker.check_model(program.model_proto, full_check=True)
    sess = _session(program.model_proto)
    for batch in (2, 9):
        x = ts.randn(batch, 3, 5)
        for got, want in zip(sess.run(None, {"x": x.numpy()}), Fold()(x)):
            np.testing.assert_allclose(got, want.numpy(), atol=ATOL, rtol=RTOL)


# --- operator coverage ---------------------------------------------------------------------------
class Elementwise(nn.Module):
    def forward(self, x, y):
        a = x.abs() + 0.5
        return (
            a.sqrt().rsqrt() + a.log() - x.exp() * 0.25, x.tanh() + x.sigmoid() - F.silu(x),
            F.gelu(x, approximate="tanh"), F.hardtanh(x, -0.5, 0.5), x.clamp(min=-0.2), F.leaky_relu(x, 0.1),
            F.elu(x), F.softplus(x), F.hardswish(x), x.pow(2) + y.pow(3.0) - ts.pow(2, y) + ts.exp2(x),
            ts.maximum(x, y) - ts.minimum(x, y), x / (y.abs() + 1), x.div(2), ts.where(x > y, x, y),
            (x >= 0) & (y < 0.5), (x == y) | (x != 0), ~(x <= 0.1), x.floor() + x.ceil() + x.round(),
            x.sign() * x.erf(), x.reciprocal(), ts.log1p(a), ts.expm1(x), x.square(), x.masked_fill(x < 0, 0.0),
            ts.div((x * 10).long(), 3, rounding_mode="floor"), ts.div((x * 10).long(), -4, rounding_mode="trunc"),
            ts.remainder((x * 10).long(), 3), ts.floor_divide(x, y.abs() + 0.5), x.remainder(0.3), ts.fmod(x, 0.3),
            x.trunc(), -x, ts.sin(x) + ts.cos(x), x.to(ts.float64) * 2, (x > 0).float(), ts.isnan(x),
        )


class Reductions(nn.Module):
    def forward(self, x):
        values, indices = x.max(dim=1)
        return (x.sum(), x.sum(dim=(0, 2), keepdim=True), x.mean(dim=-1), x.mean(), x.amax(dim=1), x.amin(dim=(0, 1)),
                values, indices, x.min(dim=2, keepdim=True).values, x.argmax(dim=2), x.argmin(), x.var(dim=1),
                x.std(dim=(1, 2), keepdim=True), x.var(dim=1, unbiased=False), ts.logsumexp(x, dim=2), x.prod(dim=1),
                F.log_softmax(x, dim=1), x.cumsum(dim=1), F.normalize(x, dim=2), ts.linalg.vector_norm(x, ord=1, dim=1))


@pytest.mark.parametrize("opset", [17, 18, 20])
def test_elementwise_and_reductions(opset):
    x, y = ts.randn(3, 4, 5), ts.randn(3, 4, 5)
    check_export(Elementwise(), (x, y), opset_version=opset)
    check_export(Reductions(), (x,), opset_version=opset)


class Shapes(nn.Module):
    def forward(self, x, idx):
        a, b = x.chunk(2, dim=1)
        p, q = x.split([1, 3], dim=1)
        parts = x.unbind(0)
        top_v, top_i = x.topk(2, dim=-1)
        return (
            a * b, q.sum(1) + p.squeeze(1), ts.stack(parts, dim=1), ts.cat([x, x * 2], dim=-1), x.permute(2, 0, 1),
            x.transpose(0, 2).reshape(-1, 6), x[:, 1:3, ::2], x[1], x[..., -1], x.unsqueeze(1).expand(3, 2, 4, 5),
            x.flatten(1), x.flip(1), x.repeat(1, 2, 1), x.index_select(1, idx),
            ts.gather(x, 2, ts.zeros(3, 4, 2).long()),
            x[idx], top_v, top_i, ts.tril(x), ts.triu(x, 1), F.pad(x, (1, 2)), F.pad(x, (1, 1, 2, 0), value=3.0),
            x.narrow(2, 1, 3), x.movedim(0, -1), ts.einsum("bij,bkj->bik", x, x), x.unflatten(2, (5, 1)).squeeze(-1),
            ts.zeros_like(x) + ts.ones(5) + ts.full((4, 1), 2.0), ts.arange(6).float() * 0.5,
            (x.view(12, 5) @ x.view(12, 5).t()).mm(ts.ones(12, 2)), ts.bmm(x, x.transpose(1, 2)),
            ts.addmm(ts.ones(2), x[0], ts.ones(5, 2), beta=0.5, alpha=2.0),
        )


def test_shape_and_indexing_ops():
    check_export(Shapes(), (ts.randn(3, 4, 5), ts.tensor([2, 0])))


class Vision(nn.Module):
    def __init__(self):
        super().__init__()
        self.gn = nn.GroupNorm(2, 4)
        self.inorm = nn.InstanceNorm2d(4, affine=True)
        self.conv = nn.Conv2d(4, 4, 3, padding=2, dilation=2)
        self.conv1d = nn.Conv1d(4, 2, 3, stride=2)
        self.ln = nn.LayerNorm(8, elementwise_affine=False)

    def forward(self, x):
        y = self.conv(self.inorm(self.gn(x)))
        return (y, F.avg_pool2d(x, 2), F.avg_pool2d(x, 3, stride=1, padding=1, count_include_pad=False),
                F.max_pool2d(x, 3, stride=2, padding=1), F.max_pool2d(x, 3, stride=2, ceil_mode=True),
                F.adaptive_avg_pool2d(x, (2, 4)), F.interpolate(x, scale_factor=2, mode="nearest"),
                F.interpolate(x, size=(12, 10), mode="bilinear", align_corners=False),
                F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True),
                self.conv1d(x.flatten(2)), self.ln(x), F.pad(x, (1, 1, 1, 1), mode="reflect"))


def test_vision_ops():
    check_export(Vision().eval(), (ts.randn(2, 4, 6, 8),))


class Primitives(nn.Module):
    """Operators called directly (ts.ops.aten), for the translations the layers above do not
    reach; composites among them decompose at capture into the primitives the IR holds."""

    def __init__(self, integer_bitwise):
        super().__init__()
        self.integer_bitwise = integer_bitwise  # BitwiseAnd and BitwiseNot need opset 18

    def forward(self, x, i):
        A = ts.ops.aten
        t, long = x.tanh(), (x * 10).long()
        bitwise = (A.bitwise_and.Tensor(long, long + 3), A.bitwise_not(long)) if self.integer_bitwise else ()
        return bitwise + (
            A.asin(t), A.acos(t), A.atan(x), A.asinh(x), A.acosh(x.abs() + 1), A.atanh(t * 0.9), A.sinh(x),
            A.cosh(x), A.tan(t), A.log2(x.abs() + 1), A.log10(x.abs() + 1), A.bitwise_not(x > 0),
            A.bitwise_xor.Tensor(x > 0, x < 1), A.logical_and(x > 0, x < 1), A.logical_or(x > 0, x < -1),
            A.lt.Tensor(x, x[0]), A.le.Tensor(x, x[0]), A.ge.Tensor(x, x[0]), A.gt.Scalar(long, 0.5),
            A.eq.Scalar(x > 0, 1), A.ne.Tensor(long, long.flip(0)), A.native_dropout(x, 0.5, False)[0],
            A.squeeze.default(x[:, :1]), A.zeros([2, 3]), A.ones([3], dtype=ts.long), A.full([2], 7, dtype=ts.long),
            A.arange.start_step(0.0, 1.0, 0.1), A.arange.start_step(10, 2, -3), A.cat([A.zeros([0]), x.flatten()]),
            A.convolution(x[0], x[:2, :, :2, :2].contiguous(), None, [1], [0], [1], 1),
            A.masked_fill.Scalar(long, x > 0, 5), A.addmm(x[0, 0, 0, :3], x[0, 0], x[0, 0, 0].view(5, 1).expand(5, 3),
                                                          beta=0.0),
            A.adaptive_avg_pool2d(x[0], [3, 1]),
            A.native_batch_norm(x, None, x[0, :, 0, 0], None, None, True, 0.1, 1e-5)[0],
            x.scatter(3, i.view(1, 1, 1, 2).expand(2, 2, 3, 2), x),
            x.scatter(1, i.view(1, 2, 1, 1).expand(2, 2, 3, 5), 2.5),
            x.scatter_add(0, i.view(2, 1, 1, 1).expand(2, 2, 3, 5), x), A.index.Tensor(x, [None, i]),
            A.max_pool2d_with_indices(x, [2, 2], [1, 1], [1, 1], [1, 1], False)[0],
            A.std.correction(x, [0, 3], correction=0),
        )


@pytest.mark.parametrize("opset,fold", [(17, True), (18, False)])
def test_operators_called_directly(opset, fold):
    args = (ts.randn(2, 2, 3, 5), ts.tensor([1, 0]))
    check_export(Primitives(opset >= 18), args, opset_version=opset, do_constant_folding=fold)
    if opset < 18:
        with pytest.raises(ts.onnx.UnsupportedOperatorError, match="bitwise_and.Tensor"):
            ts.onnx.export(Primitives(True), args, None, opset_version=opset)


def test_constant_folding():
    class Positions(nn.Module):
        def forward(self, x):
            return x + ts.arange(x.shape[1]).float() * 0.5

    x = ts.randn(2, 5)
    folded = check_export(Positions(), (x,))
    assert "Range" not in op_types(folded)
    unfolded = check_export(Positions(), (x,), do_constant_folding=False)
    assert "Range" in op_types(unfolded)


def test_kwargs_names_and_export_params_false():
    class TwoInputs(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 2)

        def forward(self, x, scale=None):
            return self.fc(x) * scale, x.sum()

    model, x, s = TwoInputs(), ts.randn(3, 4), ts.randn(3, 2)
    program = check_export(model, (x,), kwargs={"scale": s}, input_names=["inp"], output_names=["y", "total"])
    graph = program.model_proto.graph
    assert [i.name for i in graph.input] == ["inp", "scale"] and [o.name for o in graph.output] == ["y", "total"]
    program = ts.onnx.export(model, (x,), None, kwargs={"scale": s}, export_params=False)
    graph = program.model_proto.graph
    assert not graph.initializer and {"fc.weight", "fc.bias"} <= {i.name for i in graph.input}
    feeds = {"x": x.numpy(), "scale": s.numpy(), "fc.weight": model.fc.weight.detach().numpy(),
             "fc.bias": model.fc.bias.detach().numpy()}
    got = _session(program.model_proto).run(None, feeds)[0]
    np.testing.assert_allclose(got, model(x, scale=s)[0].numpy(), atol=ATOL, rtol=RTOL)


# --- files, options and refusals -----------------------------------------------------------------
def test_writes_to_a_file_object_and_a_path(tmp_path):
    model, x = MLP().eval(), ts.randn(4, 8)
    buffer = io.BytesIO()
    assert ts.onnx.export(model, x, buffer) is not None  # a single tensor is one argument
    from_buffer = onnx.load_from_string(buffer.getvalue())
    path = tmp_path / "mlp.onnx"
    ts.onnx.export(model, (x,), str(path))
    from_path = onnx.load(str(path))
    for proto in (from_buffer, from_path):
        assert proto.opset_import[0].version == 17
        got = _session(proto).run(None, {"x": x.numpy()})[0]
        np.testing.assert_allclose(got, model(x).numpy(), atol=ATOL, rtol=RTOL)


def test_opset_below_17_is_refused():
    with pytest.raises(ValueError, match="opset_version 16"):
        ts.onnx.export(MLP().eval(), (ts.randn(2, 8),), None, opset_version=16)


def test_unsupported_operator_names_itself():
    class Exotic(nn.Module):
        def forward(self, x):
            return ts.special.erfinv(x.tanh()) + 1

    with pytest.raises(ts.onnx.UnsupportedOperatorError, match=r"'erfinv'.*opset version 17") as info:
        ts.onnx.export(Exotic(), (ts.randn(3),), None)
    assert isinstance(info.value, RuntimeError) and info.value.name == "erfinv"
    assert ts.onnx.errors.UnsupportedOperatorError is ts.onnx.UnsupportedOperatorError


def test_unread_unsupported_output_is_fine_but_read_one_is_refused():
    class Pool(nn.Module):
        def __init__(self, indices):
            super().__init__()
            self.indices = indices

        def forward(self, x):
            y, i = F.max_pool2d(x, 2, return_indices=True)
            return (y, i) if self.indices else y

    check_export(Pool(False), (ts.randn(1, 2, 4, 4),))
    with pytest.raises(ts.onnx.UnsupportedOperatorError, match="max_pool2d_with_indices"):
        ts.onnx.export(Pool(True), (ts.randn(1, 2, 4, 4),), None)


def test_training_mode_buffer_updates_are_refused():
    with pytest.raises(ts.onnx.OnnxExporterError, match="model.eval"):
        ts.onnx.export(MLP().train(), (ts.randn(4, 8),), None)


def test_in_place_write_through_a_view_is_refused():
    class ViewWrite(nn.Module):
        def forward(self, x):
            y = x * 2
            y.view(-1).mul_(3)
            return y.sum(dim=1)

    with pytest.raises(ts.onnx.OnnxExporterError, match="mul_"):
        ts.onnx.export(ViewWrite(), (ts.randn(2, 3),), None)

    class InPlace(nn.Module):  # in place on a tensor nothing else shares: translated
        def forward(self, x):
            y = x * 2
            y.add_(1)
            return F.relu(y, inplace=True)

    check_export(InPlace(), (ts.randn(2, 3),))


def test_tensor_data_made_inside_forward_is_a_constant():
    # The capture lifts a tensor filled from Python data as a constant holding that data.
    class Literal(nn.Module):
        def forward(self, x):
            return x[ts.tensor([1, 0])] + ts.tensor([1.0, 2.0, 3.0])

    check_export(Literal(), (ts.randn(2, 3),))
