"""Variational auto-encoder (pytorch/examples vae shape) on synthetic 8x8 "images".

Linear encoder to a Gaussian posterior (mu, logvar), the reparameterisation trick, a Linear
decoder with a sigmoid output, BCE reconstruction + KL divergence, Adam.

Determinism: the reparameterisation noise is the only randomness in a training step. Drawn with
torch.randn_like it would differ between frameworks (their generators differ), so the training
loop draws it in NumPy and passes it in; the model falls back to torch.randn_like when no noise
is given, which the evaluation pass and the sampling at the end use (their outputs are not among
the compared losses).
"""
import argparse

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn, optim

PIXELS, HIDDEN, LATENT, BATCH = 64, 48, 4, 32


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(PIXELS, HIDDEN)
        self.fc21 = nn.Linear(HIDDEN, LATENT)
        self.fc22 = nn.Linear(HIDDEN, LATENT)
        self.fc3 = nn.Linear(LATENT, HIDDEN)
        self.fc4 = nn.Linear(HIDDEN, PIXELS)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar, eps=None):
        std = torch.exp(0.5 * logvar)
        if eps is None:
            eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x, eps=None):
        mu, logvar = self.encode(x.view(-1, PIXELS))
        z = self.reparameterize(mu, logvar, eps)
        return self.decode(z), mu, logvar


def loss_function(recon_x, x, mu, logvar):
    bce = F.binary_cross_entropy(recon_x, x.view(-1, PIXELS), reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld


def make_dataset(seed, n=256):
    """Soft strokes: each image is one of four bar prototypes, shifted and noised, in [0, 1]."""
    rng = np.random.default_rng(seed)
    protos = np.zeros((4, 8, 8))
    protos[0, 3:5, :] = 1
    protos[1, :, 3:5] = 1
    protos[2][np.eye(8, dtype=bool)] = 1
    protos[3][np.eye(8, dtype=bool)[::-1]] = 1
    labels = rng.integers(0, 4, size=n)
    imgs = np.stack([np.roll(protos[c], rng.integers(-1, 2), axis=rng.integers(0, 2)) for c in labels])
    imgs = np.clip(0.9 * imgs + 0.05 + 0.05 * rng.standard_normal(imgs.shape), 0.0, 1.0)
    return torch.from_numpy(imgs.astype(np.float32)).unsqueeze(1), rng


def main(steps=30, weights_path=None, data_seed=0, save_weights_to=None):
    torch.manual_seed(1)
    model = VAE()
    if save_weights_to is not None:
        torch.save(model.state_dict(), save_weights_to)
    if weights_path is not None:
        model.load_state_dict(torch.load(weights_path))

    data, rng = make_dataset(data_seed)
    optimizer = optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    losses = []
    while len(losses) < steps:
        for start in range(0, len(data), BATCH):
            if len(losses) == steps:
                break
            batch = data[start:start + BATCH]
            eps = torch.from_numpy(rng.standard_normal((len(batch), LATENT)).astype(np.float32))
            optimizer.zero_grad()
            recon_batch, mu, logvar = model(batch, eps)
            loss = loss_function(recon_batch, batch, mu, logvar)
            loss.backward()
            optimizer.step()
            losses.append(loss.item() / len(batch))

    model.eval()
    with torch.no_grad():  # framework-random parts: not compared
        recon, mu, logvar = model(data[:BATCH])
        assert torch.isfinite(loss_function(recon, data[:BATCH], mu, logvar))
        sample = model.decode(torch.randn(16, LATENT))
        assert sample.shape == (16, PIXELS) and bool(((sample >= 0) & (sample <= 1)).all())
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
