"""A small decoder-only transformer language model (nanoGPT-shaped), trained on a synthetic corpus.

Token + learned position embeddings, pre-LayerNorm blocks with causal self-attention through
F.scaled_dot_product_attention and a GELU MLP, the output head tied to the token embedding, AdamW
with decay / no-decay parameter groups, a warmup + cosine LambdaLR schedule and gradient clipping.
The corpus comes from a NumPy Markov chain, so every framework trains on the same tokens; nothing
random happens inside a training step (no dropout), so the per-step losses are comparable.
"""
import argparse
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, BLOCK, EMBD, HEADS, LAYERS, BATCH = 16, 16, 32, 4, 2, 8


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        assert n_embd % n_head == 0
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = MLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self, vocab_size, block_size, n_embd, n_head, n_layer):
        super().__init__()
        self.block_size = block_size
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_size, n_embd),
            wpe=nn.Embedding(block_size, n_embd),
            h=nn.ModuleList([Block(n_embd, n_head) for _ in range(n_layer)]),
            ln_f=nn.LayerNorm(n_embd),
        ))
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):  # scaled init of the residual projections
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        b, t = idx.size()
        assert t <= self.block_size, f"sequence of length {t} is longer than the block size {self.block_size}"
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        logits = self.lm_head(x)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss

    def configure_optimizers(self, weight_decay, learning_rate, betas):
        params = {name: p for name, p in self.named_parameters() if p.requires_grad}
        decay = [p for p in params.values() if p.dim() >= 2]
        no_decay = [p for p in params.values() if p.dim() < 2]
        groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=learning_rate, betas=betas)

    @torch.no_grad()
    def generate(self, idx, max_new_tokens):
        for _ in range(max_new_tokens):
            logits, _ = self(idx[:, -self.block_size:])
            next_token = logits[:, -1, :].argmax(dim=-1, keepdim=True)
            idx = torch.cat((idx, next_token), dim=1)
        return idx


def make_corpus(seed, length=4096):
    """A first-order Markov chain with a peaked transition matrix: learnable, not trivial."""
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((VOCAB, VOCAB)) * 2.5
    trans = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    tokens = np.empty(length, dtype=np.int64)
    tokens[0] = 0
    for i in range(1, length):
        tokens[i] = rng.choice(VOCAB, p=trans[tokens[i - 1]])
    return tokens, rng


def get_batch(data, rng):
    ix = rng.integers(0, len(data) - BLOCK - 1, size=BATCH)
    x = torch.from_numpy(np.stack([data[i:i + BLOCK] for i in ix]))
    y = torch.from_numpy(np.stack([data[i + 1:i + 1 + BLOCK] for i in ix]))
    return x, y


def main(steps=30, weights_path=None, data_seed=0, save_weights_to=None):
    torch.manual_seed(1337)
    model = GPT(VOCAB, BLOCK, EMBD, HEADS, LAYERS)
    if save_weights_to is not None:
        torch.save(model.state_dict(), save_weights_to)
    if weights_path is not None:
        model.load_state_dict(torch.load(weights_path))

    data, rng = make_corpus(data_seed)
    warmup, max_lr, min_lr = max(1, steps // 10), 1e-2, 1e-3

    def lr_lambda(it):  # linear warmup, then cosine decay to min_lr (as a factor of max_lr)
        if it < warmup:
            return (it + 1) / warmup
        progress = min(1.0, (it - warmup) / max(1, steps - warmup))
        return (min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (max_lr - min_lr)) / max_lr

    optimizer = model.configure_optimizers(weight_decay=0.1, learning_rate=max_lr, betas=(0.9, 0.95))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)
    model.train()
    losses = []
    for _ in range(steps):
        x, y = get_batch(data, rng)
        _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
    return losses


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--weights", help="load the initial weights from this torch.save file")
    parser.add_argument("--save-weights", help="save the initial weights to this file")
    parser.add_argument("--data-seed", type=int, default=0)
    args = parser.parse_args()
    for step, loss in enumerate(main(args.steps, args.weights, args.data_seed, args.save_weights)):
        print(f"step {step:3d}  loss {loss:.4f}")
