"""tessera.fft: PyTorch's torch.fft. Three transform operators (_fft_c2c, _fft_r2c, _fft_c2r: KISS
FFT on the CPU) and the functions composed over them in the composites plugin, so a device that
implements the three gets all of torch.fft, with autograd."""
import builtins

from tessera import _C

_call = _C.call_op
_E = {}


def _one(op):
    def transform(input, n=None, dim=-1, norm=None):
        return _call(op, (input, n, dim, norm), _E)

    transform.__name__ = op[len("fft_"):]
    transform.__doc__ = f"torch.fft.{transform.__name__}(input, n=None, dim=-1, norm=None)"
    return transform


def _as_list(v):
    if v is None:
        return None
    return [v] if isinstance(v, builtins.int) else list(v)


def _many(op, default_dim):
    def transform(input, s=None, dim=default_dim, norm=None):
        return _call(op, (input, _as_list(s), _as_list(dim), norm), _E)

    transform.__name__ = op[len("fft_"):]
    transform.__doc__ = f"torch.fft.{transform.__name__}(input, s=None, dim={default_dim!r}, norm=None)"
    return transform


fft = _one("fft_fft")
ifft = _one("fft_ifft")
rfft = _one("fft_rfft")
irfft = _one("fft_irfft")
hfft = _one("fft_hfft")
ihfft = _one("fft_ihfft")
fft2 = _many("fft_fft2", (-2, -1))
ifft2 = _many("fft_ifft2", (-2, -1))
rfft2 = _many("fft_rfft2", (-2, -1))
irfft2 = _many("fft_irfft2", (-2, -1))
fftn = _many("fft_fftn", None)
ifftn = _many("fft_ifftn", None)
rfftn = _many("fft_rfftn", None)
irfftn = _many("fft_irfftn", None)
hfft2 = _many("fft_hfft2", (-2, -1))
ihfft2 = _many("fft_ihfft2", (-2, -1))
hfftn = _many("fft_hfftn", None)
ihfftn = _many("fft_ihfftn", None)


def fftshift(input, dim=None):
    return _call("fft_fftshift", (input, _as_list(dim)), _E)


def ifftshift(input, dim=None):
    return _call("fft_ifftshift", (input, _as_list(dim)), _E)


def fftfreq(n, d=1.0, *, dtype=None, device=None, requires_grad=False):
    out = _call("fft_fftfreq", (n, d), {"dtype": dtype, "device": device})
    return out.requires_grad_() if requires_grad else out


def rfftfreq(n, d=1.0, *, dtype=None, device=None, requires_grad=False):
    out = _call("fft_rfftfreq", (n, d), {"dtype": dtype, "device": device})
    return out.requires_grad_() if requires_grad else out


__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn",
           "rfftn", "irfftn", "fftshift", "ifftshift", "fftfreq", "rfftfreq"]
