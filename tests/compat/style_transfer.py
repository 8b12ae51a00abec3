"""Fast neural style (pytorch/examples fast_neural_style shape), scaled down to 16x16 images.

TransformerNet: ConvLayer = ReflectionPad2d + Conv2d, InstanceNorm2d(affine=True), ReLU,
residual blocks, UpsampleConvLayer = F.interpolate(mode="nearest") + ConvLayer. The loss network
(VGG-16 in the example; a small frozen conv net here, part of the checkpoint) gives features for
a content loss (MSE at one layer) and a style loss (MSE between Gram matrices at two layers,
against the style image's). Adam. Images are NumPy-made patterns, the same for every framework.
"""
import argparse
from collections import namedtuple

import numpy as np
import torch
import torch.nn.functional as F
from torch.optim import Adam

SIZE, BATCH, CONTENT_WEIGHT, STYLE_WEIGHT = 16, 4, 1.0, 50.0


class ConvLayer(torch.nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride):
        super().__init__()
        self.reflection_pad = torch.nn.ReflectionPad2d(kernel_size // 2)
        self.conv2d = torch.nn.Conv2d(in_channels, out_channels, kernel_size, stride)

    def forward(self, x):
        return self.conv2d(self.reflection_pad(x))


class ResidualBlock(torch.nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = ConvLayer(channels, channels, kernel_size=3, stride=1)
        self.in1 = torch.nn.InstanceNorm2d(channels, affine=True)
        self.conv2 = ConvLayer(channels, channels, kernel_size=3, stride=1)
        self.in2 = torch.nn.InstanceNorm2d(channels, affine=True)
        self.relu = torch.nn.ReLU()

    def forward(self, x):
        residual = x
        out = self.relu(self.in1(self.conv1(x)))
        out = self.in2(self.conv2(out))
        return out + residual


class UpsampleConvLayer(torch.nn.Module):
    """Nearest-neighbour upsampling then a convolution (instead of a transposed convolution)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, upsample=None):
        super().__init__()
        self.upsample = upsample
        self.reflection_pad = torch.nn.ReflectionPad2d(kernel_size // 2)
        self.conv2d = torch.nn.Conv2d(in_channels, out_channels, kernel_size, stride)

    def forward(self, x):
        if self.upsample:
            x = F.interpolate(x, mode="nearest", scale_factor=self.upsample)
        return self.conv2d(self.reflection_pad(x))


class TransformerNet(torch.nn.Module):
    def __init__(self, c=8):
        super().__init__()
        self.conv1 = ConvLayer(3, c, kernel_size=5, stride=1)
        self.in1 = torch.nn.InstanceNorm2d(c, affine=True)
        self.conv2 = ConvLayer(c, 2 * c, kernel_size=3, stride=2)
        self.in2 = torch.nn.InstanceNorm2d(2 * c, affine=True)
        self.res1 = ResidualBlock(2 * c)
        self.res2 = ResidualBlock(2 * c)
        self.deconv1 = UpsampleConvLayer(2 * c, c, kernel_size=3, stride=1, upsample=2)
        self.in3 = torch.nn.InstanceNorm2d(c, affine=True)
        self.deconv2 = ConvLayer(c, 3, kernel_size=5, stride=1)
        self.relu = torch.nn.ReLU()

    def forward(self, X):
        y = self.relu(self.in1(self.conv1(X)))
        y = self.relu(self.in2(self.conv2(y)))
        y = self.res2(self.res1(y))
        y = self.relu(self.in3(self.deconv1(y)))
        return self.deconv2(y)


class LossNet(torch.nn.Module):
    """Stands in for the pretrained VGG: frozen, returns the activations of two slices."""

    def __init__(self):
        super().__init__()
        self.slice1 = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU())
        self.slice2 = torch.nn.Sequential(torch.nn.MaxPool2d(2), torch.nn.Conv2d(8, 16, 3, padding=1),
                                          torch.nn.ReLU())
        for param in self.parameters():
            param.requires_grad = False

    def forward(self, X):
        h1 = self.slice1(X)
        h2 = self.slice2(h1)
        return namedtuple("LossNetOutputs", ["relu1", "relu2"])(h1, h2)


def gram_matrix(y):
    (b, ch, h, w) = y.size()
    features = y.view(b, ch, w * h)
    features_t = features.transpose(1, 2)
    return features.bmm(features_t) / (ch * h * w)


def normalize_batch(batch):
    mean = batch.new_tensor([0.485, 0.456, 0.406]).view(-1, 1, 1)
    std = batch.new_tensor([0.229, 0.224, 0.225]).view(-1, 1, 1)
    return (batch - mean) / std


def make_images(seed, n=16):
    """Content: smooth colour blobs; style: diagonal stripes. Pixel values in [0, 1]."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:SIZE, 0:SIZE] / SIZE
    content = np.zeros((n, 3, SIZE, SIZE))
    for _ in range(3):
        cx, cy = rng.uniform(0, 1, size=(2, n, 1, 1, 1))
        colour = rng.uniform(0, 1, size=(n, 3, 1, 1))
        content += colour * np.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / 0.05)
    content = np.clip(content, 0, 1)
    style = 0.5 + 0.5 * np.sin(2 * np.pi * 4 * (xx + yy))[None] * np.array([1.0, 0.6, 0.2])[:, None, None]
    return torch.from_numpy(content.astype(np.float32)), torch.from_numpy(style.astype(np.float32))


def main(steps=8, weights_path=None, data_seed=0, save_weights_to=None):
    torch.manual_seed(42)
    transformer = TransformerNet()
    vgg = LossNet()
    if save_weights_to is not None:
        torch.save({"transformer": transformer.state_dict(), "vgg": vgg.state_dict()}, save_weights_to)
    if weights_path is not None:
        checkpoint = torch.load(weights_path)
        transformer.load_state_dict(checkpoint["transformer"])
        vgg.load_state_dict(checkpoint["vgg"])

    content, style = make_images(data_seed)
    optimizer = Adam(transformer.parameters(), lr=1e-3)
    mse_loss = torch.nn.MSELoss()
    style = style.repeat(BATCH, 1, 1, 1)
    features_style = vgg(normalize_batch(style))
    gram_style = [gram_matrix(y) for y in features_style]

    transformer.train()
    losses = []
    while len(losses) < steps:
        for start in range(0, len(content), BATCH):
            if len(losses) == steps:
                break
            x = content[start:start + BATCH]
            n_batch = len(x)
            optimizer.zero_grad()
            y = transformer(x)
            y, x = normalize_batch(y), normalize_batch(x)
            features_y = vgg(y)
            features_x = vgg(x)
            content_loss = CONTENT_WEIGHT * mse_loss(features_y.relu2, features_x.relu2)
            style_loss = 0.0
            for ft_y, gm_s in zip(features_y, gram_style):
                gm_y = gram_matrix(ft_y)
                style_loss += mse_loss(gm_y, gm_s[:n_batch, :, :])
            style_loss *= STYLE_WEIGHT
            total_loss = content_loss + style_loss
            total_loss.backward()
            optimizer.step()
            losses.append(total_loss.item())
    return losses


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--weights", help="load the initial weights from this torch.save file")
    parser.add_argument("--save-weights", help="save the initial weights to this file")
    parser.add_argument("--data-seed", type=int, default=0)
    args = parser.parse_args()
    for step, loss in enumerate(main(args.steps, args.weights, args.data_seed, args.save_weights)):
        print(f"step {step:3d}  total loss {loss:.4f}")
