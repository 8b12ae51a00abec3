"""DCGAN (pytorch/examples dcgan shape) at 16x16 on synthetic images.

Generator: ConvTranspose2d + BatchNorm2d + ReLU blocks, Tanh output. Discriminator: Conv2d +
LeakyReLU (+ BatchNorm2d), Sigmoid output. BCELoss, one Adam per network with betas=(0.5, 0.999),
DCGAN's weights_init applied with Module.apply. Each step trains D on a real and a fake batch,
then G through D.

Determinism: the latent noise for each step is drawn in NumPy (the example's torch.randn would
differ between frameworks); BatchNorm runs in training mode on whole batches, which is
deterministic. Returned per step: Loss_D + Loss_G.
"""
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

NZ, NGF, NDF, NC, BATCH = 8, 8, 8, 1, 16


def weights_init(m):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        torch.nn.init.normal_(m.weight, 0.0, 0.02)
    elif classname.find("BatchNorm") != -1:
        torch.nn.init.normal_(m.weight, 1.0, 0.02)
        torch.nn.init.zeros_(m.bias)


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(NZ, NGF * 4, 4, 1, 0, bias=False),      # -> 4x4
            nn.BatchNorm2d(NGF * 4),
            nn.ReLU(True),
            nn.ConvTranspose2d(NGF * 4, NGF * 2, 4, 2, 1, bias=False),  # -> 8x8
            nn.BatchNorm2d(NGF * 2),
            nn.ReLU(True),
            nn.ConvTranspose2d(NGF * 2, NC, 4, 2, 1, bias=False),       # -> 16x16
            nn.Tanh(),
        )

    def forward(self, input):
        return self.main(input)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(NC, NDF, 4, 2, 1, bias=False),                    # -> 8x8
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(NDF, NDF * 2, 4, 2, 1, bias=False),               # -> 4x4
            nn.BatchNorm2d(NDF * 2),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(NDF * 2, 1, 4, 1, 0, bias=False),                 # -> 1x1
            nn.Sigmoid(),
        )

    def forward(self, input):
        return self.main(input).view(-1, 1).squeeze(1)


def make_dataset(seed, n=128):
    """Blurry discs of random centre and radius, scaled to [-1, 1] as the Tanh output."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:16, 0:16]
    cx, cy = rng.uniform(5, 11, size=(2, n))
    r = rng.uniform(2.5, 5, size=n)
    d = np.sqrt((xx[None] - cx[:, None, None]) ** 2 + (yy[None] - cy[:, None, None]) ** 2)
    imgs = np.tanh(2.0 * (r[:, None, None] - d)) * 0.9
    return torch.from_numpy(imgs.astype(np.float32)).unsqueeze(1), rng


def main(steps=12, weights_path=None, data_seed=0, save_weights_to=None):
    torch.manual_seed(999)
    netG = Generator()
    netG.apply(weights_init)
    netD = Discriminator()
    netD.apply(weights_init)
    if save_weights_to is not None:
        torch.save({"netG": netG.state_dict(), "netD": netD.state_dict()}, save_weights_to)
    if weights_path is not None:
        checkpoint = torch.load(weights_path)
        netG.load_state_dict(checkpoint["netG"])
        netD.load_state_dict(checkpoint["netD"])

    data, rng = make_dataset(data_seed)
    criterion = nn.BCELoss()
    real_label, fake_label = 1.0, 0.0
    optimizerD = optim.Adam(netD.parameters(), lr=2e-3, betas=(0.5, 0.999))
    optimizerG = optim.Adam(netG.parameters(), lr=2e-3, betas=(0.5, 0.999))
    losses = []
    while len(losses) < steps:
        for start in range(0, len(data), BATCH):
            if len(losses) == steps:
                break
            # (1) Update D: maximize log(D(x)) + log(1 - D(G(z)))
            netD.zero_grad()
            real = data[start:start + BATCH]
            batch_size = real.size(0)
            label = torch.full((batch_size,), real_label, dtype=real.dtype)
            output = netD(real)
            errD_real = criterion(output, label)
            errD_real.backward()
            noise = torch.from_numpy(rng.standard_normal((batch_size, NZ, 1, 1)).astype(np.float32))
            fake = netG(noise)
            label.fill_(fake_label)
            output = netD(fake.detach())
            errD_fake = criterion(output, label)
            errD_fake.backward()
            errD = errD_real + errD_fake
            optimizerD.step()
            # (2) Update G: maximize log(D(G(z)))
            netG.zero_grad()
            label.fill_(real_label)  # fake labels are real for the generator cost
            output = netD(fake)
            errG = criterion(output, label)
            errG.backward()
            optimizerG.step()
            losses.append(errD.item() + errG.item())
    return losses


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--weights", help="load the initial weights from this torch.save file")
    parser.add_argument("--save-weights", help="save the initial weights to this file")
    parser.add_argument("--data-seed", type=int, default=0)
    args = parser.parse_args()
    for step, loss in enumerate(main(args.steps, args.weights, args.data_seed, args.save_weights)):
        print(f"step {step:3d}  Loss_D + Loss_G {loss:.4f}")
