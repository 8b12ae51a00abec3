"""More models for benchmarks/models.py, written against torch's API as their users write them, so
the same code runs on Tessera and on PyTorch (pass the module: `vit_s16(ts)` or `vit_s16(torch)`):
a ViT-S/16, a BERT-base-shaped encoder, the LSTM word language model of pytorch/examples and the
digits CNN of examples/train_digits.py."""


def vit_s16(lib, image=224, classes=1000):
    """ViT-S/16: 16x16 patches, 12 pre-norm layers, 384 wide, 6 heads, MLP 1536, a class token."""
    nn = lib.nn
    dim, patch = 384, 16

    class ViT(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch_embed = nn.Conv2d(3, dim, patch, stride=patch)
            tokens = (image // patch) ** 2 + 1
            self.cls_token = nn.Parameter(lib.zeros(1, 1, dim))
            self.pos_embed = nn.Parameter(0.02 * lib.randn(1, tokens, dim))
            layer = nn.TransformerEncoderLayer(dim, 6, 4 * dim, dropout=0.0, activation="gelu", batch_first=True,
                                               norm_first=True)
            self.encoder = nn.TransformerEncoder(layer, 12, enable_nested_tensor=False)
            self.norm = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, classes)

        def forward(self, x):
            x = self.patch_embed(x).flatten(2).transpose(1, 2)  # [B, patches, dim]
            x = lib.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
            return self.head(self.norm(self.encoder(x))[:, 0])

    return ViT()


def bert_encoder(lib, vocab=30522, seq=128):
    """BERT-base's encoder shape: 12 post-norm layers, 768 wide, 12 heads, MLP 3072, GELU."""
    nn = lib.nn
    dim = 768

    class Bert(nn.Module):
        def __init__(self):
            super().__init__()
            self.tokens = nn.Embedding(vocab, dim)
            self.positions = nn.Embedding(seq, dim)
            self.norm = nn.LayerNorm(dim)
            layer = nn.TransformerEncoderLayer(dim, 12, 4 * dim, dropout=0.1, activation="gelu", batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, 12, enable_nested_tensor=False)

        def forward(self, ids, padding_mask=None):
            x = self.norm(self.tokens(ids) + self.positions(lib.arange(ids.shape[1])))
            return self.encoder(x, src_key_padding_mask=padding_mask)

    return Bert()


def lstm_lm(lib, vocab=33278, embed=200, hidden=200, layers=2, dropout=0.2):
    """pytorch/examples' word_language_model, LSTM flavour (its defaults; WikiText-2's vocabulary):
    forward(input [seq, batch], hidden) -> (log-probabilities [seq * batch, vocab], hidden)."""
    nn = lib.nn
    F = lib.nn.functional

    class RNNModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.drop = nn.Dropout(dropout)
            self.encoder = nn.Embedding(vocab, embed)
            self.rnn = nn.LSTM(embed, hidden, layers, dropout=dropout)
            self.decoder = nn.Linear(hidden, vocab)

        def forward(self, input, hidden):
            output, hidden = self.rnn(self.drop(self.encoder(input)), hidden)
            decoded = self.decoder(self.drop(output)).view(-1, vocab)
            return F.log_softmax(decoded, dim=1), hidden

        def init_hidden(self, batch):
            return (lib.zeros(layers, batch, hidden), lib.zeros(layers, batch, hidden))

    return RNNModel()


def digits_cnn(lib):
    """examples/train_digits.py's CNN: 8x8 one-channel images, 10 classes."""
    nn = lib.nn
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(128, 10))
