"""Exports a small CNN classifier (dynamic batch 1..64 -> here 2..64) for serve_exported.cpp, and
writes request batches with the outputs eager Tessera computes for them (the server checks its
answers against these).
    python3 export_model.py model.tspt requests.safetensors"""
import sys

import tessera as ts
import tessera.nn as nn


class SmallCNN(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.classifier = nn.Linear(32, classes)

    def forward(self, images):
        return self.classifier(self.features(images).flatten(1)).softmax(-1)


def main(archive, requests):
    ts.manual_seed(0)
    model = SmallCNN().eval()
    batch = ts.export.Dim("batch", max=64)
    ep = ts.export.export(model, (ts.randn(8, 1, 28, 28),), dynamic_shapes={"images": {0: batch}})
    ts.export.save(ep, archive)
    tensors = {}
    for k, n in enumerate((3, 16, 64)):
        x = ts.randn(n, 1, 28, 28)
        tensors[f"request_{k}"] = x
        tensors[f"expected_{k}"] = model(x)
    ts.save(tensors, requests)
    print(f"exported {archive}: {len(ep.operators())} operators; {len(tensors) // 2} requests in {requests}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
