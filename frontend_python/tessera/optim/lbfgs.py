"""L-BFGS with torch's algorithm, stopping rules, optional strong-Wolfe line search and state.

Dot products and the scalars derived from them (ys, ro, H_diag, the two-loop coefficients, gtd)
stay 0-d float32 tensors, as in torch, so the arithmetic rounds the same way and trajectories
match torch's to float32 precision. Losses are Python floats."""
import tessera
from tessera.nn import _autograd
from tessera.optim.optimizer import Optimizer


def _cubic_min(x1, f1, g1, x2, f2, g2, bounds=None):
    """Minimiser of the cubic through (x1, f1, slope g1) and (x2, f2, slope g2), clipped to bounds
    (default: the interval between the points); the midpoint when the cubic has no minimum."""
    lo, hi = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    disc = d1 ** 2 - g1 * g2
    if disc < 0:
        return (lo + hi) / 2.0
    d2 = disc.sqrt() if isinstance(disc, tessera.Tensor) else disc ** 0.5
    # written from the point farther along so the formula stays well conditioned
    if x1 <= x2:
        x = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        x = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(x, lo), hi)


class _Point:
    """A trial step t along d with its loss f, flat gradient g and slope gtd = g . d."""
    __slots__ = ("t", "f", "g", "gtd")

    def __init__(self, t, f, g, gtd):
        self.t, self.f, self.g, self.gtd = t, f, g, gtd


def _strong_wolfe(evaluate, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """Finds t satisfying the strong Wolfe conditions along d (Nocedal & Wright, alg. 3.5/3.6, as
    minFunc and torch run them): bracket, then zoom by safeguarded cubic interpolation. Returns
    (f, g, t, evaluations)."""
    d_scale = d.abs().max()
    start = _Point(0, f, g.clone(), gtd)

    def sufficient_decrease(p):
        return p.f > f + c1 * p.t * gtd

    def curvature_ok(p):
        return abs(p.gtd) <= -c2 * gtd

    def trial(step):
        f_new, g_new = evaluate(step, d)
        return _Point(step, f_new, g_new, g_new.dot(d))

    cur = trial(t)
    evals, iters = 1, 0
    prev = start
    bracket, found = None, False
    # ---- bracketing phase: grow t until an interval holding a Wolfe point is known
    while iters < max_ls:
        if sufficient_decrease(cur) or (iters > 1 and cur.f >= prev.f):
            bracket = [prev, _Point(cur.t, cur.f, cur.g.clone(), cur.gtd)]
            break
        if curvature_ok(cur):
            bracket, found = [cur], True
            break
        if cur.gtd >= 0:
            bracket = [prev, _Point(cur.t, cur.f, cur.g.clone(), cur.gtd)]
            break
        # extrapolate: at least 1% beyond t, at most 10 t
        step = _cubic_min(prev.t, prev.f, prev.gtd, cur.t, cur.f, cur.gtd,
                          bounds=(cur.t + 0.01 * (cur.t - prev.t), cur.t * 10))
        prev = _Point(cur.t, cur.f, cur.g.clone(), cur.gtd)
        cur = trial(step)
        evals += 1
        iters += 1
    if iters == max_ls:  # evaluation budget spent: fall back to [0, t]
        bracket = [_Point(0, f, start.g, None), _Point(cur.t, cur.f, cur.g, None)]

    # ---- zoom phase: shrink the bracket around the Wolfe point
    low, high = (0, 1) if bracket[0].f <= bracket[-1].f else (1, 0)
    stalled = False
    while not found and iters < max_ls:
        a, b = bracket
        if abs(b.t - a.t) * d_scale < tolerance_change:
            break
        step = _cubic_min(a.t, a.f, a.gtd, b.t, b.f, b.gtd)
        # a trial hugging an end of the bracket makes little progress: after two in a row (or
        # one outside it), move it 10% of the bracket's width inside
        t_lo, t_hi = min(a.t, b.t), max(a.t, b.t)
        margin = 0.1 * (t_hi - t_lo)
        if min(t_hi - step, step - t_lo) < margin:
            if stalled or step >= t_hi or step <= t_lo:
                step = t_hi - margin if abs(step - t_hi) < abs(step - t_lo) else t_lo + margin
                stalled = False
            else:
                stalled = True
        else:
            stalled = False
        cur = trial(step)
        evals += 1
        iters += 1
        if sufficient_decrease(cur) or cur.f >= bracket[low].f:
            bracket[high] = _Point(cur.t, cur.f, cur.g.clone(), cur.gtd)
            low, high = (0, 1) if bracket[0].f <= bracket[1].f else (1, 0)
        else:
            if curvature_ok(cur):
                found = True
            elif cur.gtd * (bracket[high].t - bracket[low].t) >= 0:
                bracket[high] = bracket[low]  # the slope says the minimum lies on the low side
            bracket[low] = _Point(cur.t, cur.f, cur.g.clone(), cur.gtd)
    best = bracket[low]
    return best.f, best.g, best.t, evals


class LBFGS(Optimizer):
    """Limited-memory BFGS over all parameters flattened into one vector. step(closure) runs up
    to max_iter iterations (max_eval closure calls); the closure must clear the gradients,
    compute the loss, call backward() and return the loss. One parameter group only."""

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7, tolerance_change=1e-9,
                 history_size=100, line_search_fn=None, *, maximize=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        super().__init__(params, dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                                      tolerance_change=tolerance_change, history_size=history_size,
                                      line_search_fn=line_search_fn, maximize=maximize))
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]
        self._numel_cache = None

    def _numel(self):
        if self._numel_cache is None:
            self._numel_cache = sum(p.numel() for p in self._params)
        return self._numel_cache

    # ---- the parameters as one flat vector
    def _flat_grad(self):
        parts = []
        for p in self._params:
            g = getattr(p, "grad", None)
            parts.append(tessera.zeros(p.numel(), dtype=p.dtype, device=p.device) if g is None else g.reshape(-1))
        flat = tessera.cat(parts, 0)  # a copy: a closure zeroing grads in place must not change it
        if self.param_groups[0].get("maximize", False):
            flat.neg_()
        return flat

    def _move(self, step, direction):
        """p += step * direction, direction split back into the parameters' shapes."""
        offset = 0
        for p in self._params:
            n = p.numel()
            p.add_(direction[offset:offset + n].view_as(p), alpha=step)
            offset += n
        assert offset == self._numel()

    def _loss(self, closure):
        with _autograd.enable_grad():
            loss = closure()
        return loss

    def _evaluate_at(self, closure, x0, step, direction):
        """Loss and flat gradient at x0 + step * direction; the parameters are put back to x0."""
        self._move(step, direction)
        f = float(self._loss(closure))
        if self.param_groups[0].get("maximize", False):
            f = -f
        g = self._flat_grad()
        for p, x in zip(self._params, x0):
            p.copy_(x)
        return f, g

    def step(self, closure):
        if len(self._params) == 0:
            return self._loss(closure)
        group = self.param_groups[0]
        lr = float(group["lr"])
        max_iter, max_eval = group["max_iter"], group["max_eval"]
        tol_grad, tol_change = group["tolerance_grad"], group["tolerance_change"]
        line_search, history_size = group["line_search_fn"], group["history_size"]
        sign = -1.0 if group.get("maximize", False) else 1.0
        # the state is global; torch files it under the first parameter (so load_state_dict casts it)
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        with _autograd.no_grad():
            orig_loss = self._loss(closure)
            loss = sign * float(orig_loss)
            evals = 1
            state["func_evals"] += 1
            flat_grad = self._flat_grad()
            if flat_grad.abs().max() <= tol_grad:  # already at a stationary point
                return orig_loss

            d, t = state.get("d"), state.get("t")
            old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
            H_diag, prev_flat_grad, prev_loss = state.get("H_diag"), state.get("prev_flat_grad"), state.get("prev_loss")

            n_iter = 0
            while n_iter < max_iter:
                n_iter += 1
                state["n_iter"] += 1
                # ---- search direction
                if state["n_iter"] == 1:
                    d = flat_grad.neg()
                    old_dirs, old_stps, ro, H_diag = [], [], [], 1
                else:
                    y = flat_grad.sub(prev_flat_grad)
                    s = d.mul(t)
                    ys = y.dot(s)
                    if ys > 1e-10:  # keep the pair only where the curvature is positive
                        if len(old_dirs) == history_size:
                            old_dirs.pop(0)
                            old_stps.pop(0)
                            ro.pop(0)
                        old_dirs.append(y)
                        old_stps.append(s)
                        ro.append(1.0 / ys)
                        H_diag = ys / y.dot(y)  # scale of the initial inverse Hessian
                    d = self._two_loop(state, flat_grad, old_dirs, old_stps, ro, H_diag, history_size)
                if prev_flat_grad is None:
                    prev_flat_grad = flat_grad.clone()
                else:
                    prev_flat_grad.copy_(flat_grad)
                prev_loss = loss

                # ---- step length: the first iteration is scaled down by the gradient's size
                t = min(1.0, 1.0 / flat_grad.abs().sum()) * lr if state["n_iter"] == 1 else lr
                gtd = flat_grad.dot(d)
                if gtd > -tol_change:  # not a descent direction (any more)
                    break
                spent = 0
                if line_search is not None:
                    if line_search != "strong_wolfe":
                        raise RuntimeError("only 'strong_wolfe' is supported")
                    x0 = [p.clone() for p in self._params]
                    loss, flat_grad, t, spent = _strong_wolfe(
                        lambda step, direction: self._evaluate_at(closure, x0, step, direction),
                        t, d, loss, flat_grad, gtd, max_ls=max_eval - evals)
                    self._move(t, d)
                    opt_cond = flat_grad.abs().max() <= tol_grad
                else:
                    self._move(t, d)
                    opt_cond = False
                    if n_iter != max_iter:  # the last iteration's loss would go unused
                        loss = sign * float(self._loss(closure))
                        flat_grad = self._flat_grad()
                        opt_cond = flat_grad.abs().max() <= tol_grad
                        spent = 1
                evals += spent
                state["func_evals"] += spent

                # ---- stopping rules
                if n_iter == max_iter or evals >= max_eval or opt_cond:
                    break
                if d.mul(t).abs().max() <= tol_change:  # the parameters barely moved
                    break
                if abs(loss - prev_loss) < tol_change:  # the loss barely moved
                    break

            state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=H_diag,
                         prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss

    @staticmethod
    def _two_loop(state, flat_grad, old_dirs, old_stps, ro, H_diag, history_size):
        """-H g with H the L-BFGS inverse-Hessian approximation from the stored (s, y) pairs."""
        if "al" not in state:
            state["al"] = [None] * history_size
        al = state["al"]
        q = flat_grad.neg()
        for i in reversed(range(len(old_dirs))):
            al[i] = old_stps[i].dot(q) * ro[i]
            q.add_(old_dirs[i], alpha=-al[i])
        r = q.mul(H_diag)
        for i in range(len(old_dirs)):
            be_i = old_dirs[i].dot(r) * ro[i]
            r.add_(old_stps[i], alpha=al[i] - be_i)
        return r
