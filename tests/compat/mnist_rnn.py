"""Row-by-row LSTM image classifier (pytorch/examples mnist_rnn shape) on synthetic 12x12 "digits".

Each image is read as a sequence of its rows by nn.LSTM(batch_first=True); a Linear layer on the
last output gives the class logits; F.cross_entropy, Adam, StepLR decaying the rate each epoch.
Batches come from a DataLoader with two worker processes over a TensorDataset.

Determinism: shuffle=False, since a shuffling sampler draws its order from the framework's
generator (the two frameworks would see different batches); worker processes return batches in
sampler order, so the batches are the same for every framework and any number of workers.
"""
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset

SIZE, CLASSES, HIDDEN, BATCH = 12, 4, 24, 16


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(input_size=SIZE, hidden_size=HIDDEN, batch_first=True)
        self.batchnorm = nn.BatchNorm1d(HIDDEN)
        self.fc = nn.Linear(HIDDEN, CLASSES)

    def forward(self, input):
        input = input.reshape(-1, SIZE, SIZE)  # (batch, 1, rows, cols) -> (batch, rows, cols)
        output, hidden = self.rnn(input)
        output = output[:, -1, :]  # the last row's output
        output = self.batchnorm(output)
        return self.fc(output)


def make_dataset(seed, n=96):
    """Four classes of strokes (horizontal, vertical, two diagonals), jittered, with noise."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, CLASSES, size=n)
    imgs = np.zeros((n, SIZE, SIZE), dtype=np.float32)
    for i, c in enumerate(labels):
        k = rng.integers(3, SIZE - 3)
        if c == 0:
            imgs[i, k, 2:-2] = 1
        elif c == 1:
            imgs[i, 2:-2, k] = 1
        elif c == 2:
            imgs[i][np.eye(SIZE, k=k - SIZE // 2, dtype=bool)] = 1
        else:
            imgs[i][np.eye(SIZE, k=k - SIZE // 2, dtype=bool)[::-1]] = 1
    imgs += 0.2 * rng.standard_normal(imgs.shape).astype(np.float32)
    imgs = (imgs - 0.1307) / 0.3081
    return TensorDataset(torch.from_numpy(imgs).unsqueeze(1), torch.from_numpy(labels))


def main(steps=12, weights_path=None, data_seed=0, save_weights_to=None):
    torch.manual_seed(1)
    model = Net()
    if save_weights_to is not None:
        torch.save(model.state_dict(), save_weights_to)
    if weights_path is not None:
        model.load_state_dict(torch.load(weights_path))

    train_loader = DataLoader(make_dataset(data_seed), batch_size=BATCH, shuffle=False, num_workers=2)
    optimizer = optim.Adam(model.parameters(), lr=1e-2)
    scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
    losses = []
    while len(losses) < steps:  # epochs
        model.train()
        for data, target in train_loader:
            if len(losses) == steps:
                break
            optimizer.zero_grad()
            output = model(data)
            loss = F.cross_entropy(output, target)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        scheduler.step()
    return losses


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--weights", help="load the initial weights from this torch.save file")
    parser.add_argument("--save-weights", help="save the initial weights to this file")
    parser.add_argument("--data-seed", type=int, default=0)
    args = parser.parse_args()
    for step, loss in enumerate(main(args.steps, args.weights, args.data_seed, args.save_weights)):
        print(f"step {step:3d}  loss {loss:.4f}")
