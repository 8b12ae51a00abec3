"""Word-level language model (pytorch/examples word_language_model shape) on a synthetic corpus.

Embedding -> 2-layer nn.LSTM (dropout 0, so a step is deterministic) -> Linear decoder; the
corpus is batchified into columns and trained with truncated back-propagation through time: the
hidden state is carried from one window to the next but detached, gradients are clipped with
clip_grad_norm_ and applied by SGD. The corpus is a NumPy Markov chain, identical for every
framework.
"""
import argparse

import numpy as np
import torch
import torch.nn as nn

NTOKENS, EMSIZE, NHID, NLAYERS, BATCH, BPTT = 12, 32, 32, 2, 8, 12


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid, nlayers, dropout=0.0):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        self.nhid, self.nlayers = nhid, nlayers
        self.init_weights()

    def init_weights(self):
        initrange = 0.5  # larger than the usual 0.1: learns within a few dozen steps
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output).view(-1, self.decoder.out_features)
        return torch.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid))


def repackage_hidden(h):
    """Detaches hidden states from the graph of the previous window."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous()


def get_batch(source, i):
    seq_len = min(BPTT, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len].reshape(-1)
    return data, target


def make_corpus(seed, length=1600):
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((NTOKENS, NTOKENS)) * 4.0
    trans = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    tokens = np.empty(length, dtype=np.int64)
    tokens[0] = 0
    for i in range(1, length):
        tokens[i] = rng.choice(NTOKENS, p=trans[tokens[i - 1]])
    return torch.from_numpy(tokens)


def main(steps=20, weights_path=None, data_seed=0, save_weights_to=None):
    torch.manual_seed(1111)
    model = RNNModel(NTOKENS, EMSIZE, NHID, NLAYERS, dropout=0.0)
    if save_weights_to is not None:
        torch.save(model.state_dict(), save_weights_to)
    if weights_path is not None:
        model.load_state_dict(torch.load(weights_path))

    train_data = batchify(make_corpus(data_seed), BATCH)
    criterion = nn.NLLLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=5.0)
    model.train()
    losses = []
    while len(losses) < steps:  # epochs
        hidden = model.init_hidden(BATCH)
        for i in range(0, train_data.size(0) - 1, BPTT):
            if len(losses) == steps:
                break
            data, targets = get_batch(train_data, i)
            hidden = repackage_hidden(hidden)
            model.zero_grad()
            output, hidden = model(data, hidden)
            loss = criterion(output, targets)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
            optimizer.step()
            losses.append(loss.item())
    return losses


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--weights", help="load the initial weights from this torch.save file")
    parser.add_argument("--save-weights", help="save the initial weights to this file")
    parser.add_argument("--data-seed", type=int, default=0)
    args = parser.parse_args()
    for step, loss in enumerate(main(args.steps, args.weights, args.data_seed, args.save_weights)):
        print(f"step {step:3d}  loss {loss:.4f}  ppl {np.exp(loss):8.2f}")
