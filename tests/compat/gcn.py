"""Two-layer graph convolutional network (Kipf & Welling) for node classification on a synthetic graph.

The graph is a stochastic block model drawn in NumPy, its adjacency matrix (with self-loops)
symmetrically normalised D^-1/2 (A + I) D^-1/2 and kept dense; a graph convolution is
adj @ (x @ W) + b through torch.mm. ReLU between the layers, log_softmax + NLL loss on the
training nodes, Adam with weight decay. Full-batch and dropout 0: every step is deterministic.
"""
import argparse
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

NODES, CLASSES, FEATURES, HIDDEN = 90, 3, 24, 16


class GraphConvolution(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = nn.Parameter(torch.empty(in_features, out_features))
        if bias:
            self.bias = nn.Parameter(torch.empty(out_features))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.weight.size(1))
        self.weight.data.uniform_(-stdv, stdv)
        if self.bias is not None:
            self.bias.data.uniform_(-stdv, stdv)

    def forward(self, input, adj):
        support = torch.mm(input, self.weight)
        output = torch.mm(adj, support)
        return output + self.bias if self.bias is not None else output

    def extra_repr(self):
        return f"{self.in_features} -> {self.out_features}"


class GCN(nn.Module):
    def __init__(self, nfeat, nhid, nclass, dropout=0.0):
        super().__init__()
        self.gc1 = GraphConvolution(nfeat, nhid)
        self.gc2 = GraphConvolution(nhid, nclass)
        self.dropout = dropout

    def forward(self, x, adj):
        x = F.relu(self.gc1(x, adj))
        x = F.dropout(x, self.dropout, training=self.training)
        x = self.gc2(x, adj)
        return F.log_softmax(x, dim=1)


def make_graph(seed):
    """Stochastic block model: dense within a class, sparse across; noisy class-mean features."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(CLASSES), NODES // CLASSES)
    same = labels[:, None] == labels[None, :]
    upper = np.triu(rng.uniform(size=(NODES, NODES)) < np.where(same, 0.15, 0.02), 1)
    adj = (upper | upper.T).astype(np.float64) + np.eye(NODES)
    d_inv_sqrt = 1.0 / np.sqrt(adj.sum(axis=1))
    adj = adj * d_inv_sqrt[:, None] * d_inv_sqrt[None, :]
    centres = rng.standard_normal((CLASSES, FEATURES))
    features = 0.4 * centres[labels] + rng.standard_normal((NODES, FEATURES))
    features /= np.abs(features).sum(axis=1, keepdims=True)  # row-normalised, as in the GCN paper
    idx = rng.permutation(NODES)
    return (torch.from_numpy(features.astype(np.float32)), torch.from_numpy(adj.astype(np.float32)),
            torch.from_numpy(labels), torch.from_numpy(idx[:30]), torch.from_numpy(idx[30:]))


def accuracy(output, labels):
    preds = output.max(1)[1].type_as(labels)
    return preds.eq(labels).double().sum() / len(labels)


def main(steps=30, weights_path=None, data_seed=0, save_weights_to=None):
    torch.manual_seed(42)
    model = GCN(FEATURES, HIDDEN, CLASSES, dropout=0.0)
    if save_weights_to is not None:
        torch.save(model.state_dict(), save_weights_to)
    if weights_path is not None:
        model.load_state_dict(torch.load(weights_path))

    features, adj, labels, idx_train, idx_test = make_graph(data_seed)
    optimizer = optim.Adam(model.parameters(), lr=0.02, weight_decay=5e-4)
    losses = []
    for _ in range(steps):
        model.train()
        optimizer.zero_grad()
        output = model(features, adj)
        loss_train = F.nll_loss(output[idx_train], labels[idx_train])
        loss_train.backward()
        optimizer.step()
        losses.append(loss_train.item())

    model.eval()
    with torch.no_grad():
        output = model(features, adj)
        main.test_accuracy = accuracy(output[idx_test], labels[idx_test]).item()
    return losses


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--weights", help="load the initial weights from this torch.save file")
    parser.add_argument("--save-weights", help="save the initial weights to this file")
    parser.add_argument("--data-seed", type=int, default=0)
    args = parser.parse_args()
    for step, loss in enumerate(main(args.steps, args.weights, args.data_seed, args.save_weights)):
        print(f"epoch {step:3d}  loss_train {loss:.4f}")
    print(f"test accuracy {main.test_accuracy:.3f}")
