"""Sub-pixel convolution super-resolution (pytorch/examples super_resolution shape), 2x upscaling.

Conv2d + ReLU feature layers, a last Conv2d to upscale_factor**2 channels and nn.PixelShuffle to
rearrange them into the high-resolution image; orthogonal initialisation, MSE loss, Adam. The
images are smooth random fields made in NumPy; the low-resolution input is their 2x2 average.
"""
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.init as init
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset

UPSCALE, HR, BATCH = 2, 16, 8


class Net(nn.Module):
    def __init__(self, upscale_factor):
        super().__init__()
        self.relu = nn.ReLU()
        self.conv1 = nn.Conv2d(1, 16, (5, 5), (1, 1), (2, 2))
        self.conv2 = nn.Conv2d(16, 16, (3, 3), (1, 1), (1, 1))
        self.conv3 = nn.Conv2d(16, 8, (3, 3), (1, 1), (1, 1))
        self.conv4 = nn.Conv2d(8, upscale_factor ** 2, (3, 3), (1, 1), (1, 1))
        self.pixel_shuffle = nn.PixelShuffle(upscale_factor)
        self._initialize_weights()

    def forward(self, x):
        x = self.relu(self.conv1(x))
        x = self.relu(self.conv2(x))
        x = self.relu(self.conv3(x))
        return self.pixel_shuffle(self.conv4(x))

    def _initialize_weights(self):
        init.orthogonal_(self.conv1.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv2.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv3.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv4.weight)


def make_dataset(seed, n=48):
    """Sums of a few random 2-D sinusoids in [0, 1] (high resolution) and their 2x2 means."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:HR, 0:HR] / HR
    hr = np.zeros((n, HR, HR))
    for _ in range(3):
        fx, fy = rng.uniform(0.5, 3.0, size=(2, n, 1, 1))
        phase = rng.uniform(0, 2 * np.pi, size=(n, 1, 1))
        hr += np.sin(2 * np.pi * (fx * xx + fy * yy) + phase)
    hr = (hr - hr.min()) / (hr.max() - hr.min())
    lr = hr.reshape(n, HR // UPSCALE, UPSCALE, HR // UPSCALE, UPSCALE).mean(axis=(2, 4))
    as_tensor = lambda a: torch.from_numpy(a.astype(np.float32)).unsqueeze(1)
    return TensorDataset(as_tensor(lr), as_tensor(hr))


def main(steps=12, weights_path=None, data_seed=0, save_weights_to=None):
    torch.manual_seed(123)
    model = Net(upscale_factor=UPSCALE)
    if save_weights_to is not None:
        torch.save(model.state_dict(), save_weights_to)
    if weights_path is not None:
        model.load_state_dict(torch.load(weights_path))

    training_data_loader = DataLoader(make_dataset(data_seed), batch_size=BATCH, shuffle=False)
    criterion = nn.MSELoss()
    optimizer = optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    while len(losses) < steps:
        for input, target in training_data_loader:
            if len(losses) == steps:
                break
            optimizer.zero_grad()
            loss = criterion(model(input), target)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return losses


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--weights", help="load the initial weights from this torch.save file")
    parser.add_argument("--save-weights", help="save the initial weights to this file")
    parser.add_argument("--data-seed", type=int, default=0)
    args = parser.parse_args()
    for step, loss in enumerate(main(args.steps, args.weights, args.data_seed, args.save_weights)):
        print(f"step {step:3d}  loss {loss:.5f}  PSNR {10 * np.log10(1 / loss):.2f} dB")
