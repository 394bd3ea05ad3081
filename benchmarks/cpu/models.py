"""The benchmark's models, built with random weights from a fixed seed so every process rebuilds the same ones.

ResNet-50 and MobileNetV2 come from torchvision; their BatchNorm statistics are set by a few training-mode
passes over random images (weights stay random), so activations keep a sane scale through the network and the
output comparison means something. The BERT-base encoder is written here in plain torch (BERT's layout:
word + position + token-type embeddings, LayerNorm, 12 post-LN layers of self-attention and a GELU FFN).
"""
import math

import torch
from torch import nn

SEED = 0
SEQUENCE = 128
VOCAB = 30522


class SelfAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.query, self.key, self.value = nn.Linear(hidden, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, hidden)

    def split_heads(self, x):  # [B, S, H] -> [B, heads, S, head_dim]
        b, s, _ = x.shape
        return x.view(b, s, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x, mask_bias):
        q, k, v = self.split_heads(self.query(x)), self.split_heads(self.key(x)), self.split_heads(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim) + mask_bias
        context = torch.matmul(torch.softmax(scores, dim=-1), v)
        b, _, s, _ = context.shape
        return self.out(context.transpose(1, 2).reshape(b, s, self.heads * self.head_dim))


class EncoderLayer(nn.Module):
    def __init__(self, hidden, heads, ffn):
        super().__init__()
        self.attention = SelfAttention(hidden, heads)
        self.attention_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.ffn_in, self.ffn_out = nn.Linear(hidden, ffn), nn.Linear(ffn, hidden)
        self.gelu = nn.GELU()
        self.ffn_norm = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x, mask_bias):
        x = self.attention_norm(x + self.attention(x, mask_bias))
        return self.ffn_norm(x + self.ffn_out(self.gelu(self.ffn_in(x))))


class BertEncoder(nn.Module):
    """BERT-base: 12 layers, hidden 768, 12 heads, FFN 3072. Inputs: int64 token ids and attention mask [B, S]."""

    def __init__(self, layers=12, hidden=768, heads=12, ffn=3072, max_positions=512):
        super().__init__()
        self.word = nn.Embedding(VOCAB, hidden)
        self.position = nn.Embedding(max_positions, hidden)
        self.token_type = nn.Embedding(2, hidden)
        self.embedding_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.layers = nn.ModuleList(EncoderLayer(hidden, heads, ffn) for _ in range(layers))
        # BERT's initialisation, N(0, 0.02) weights, with small random biases and norm parameters as a trained
        # model has (zeros and ones would let an optimizer drop the adds and scales, which a real model keeps).
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.bias, std=0.02)
            if isinstance(m, nn.LayerNorm):
                nn.init.normal_(m.weight, mean=1.0, std=0.02)
                nn.init.normal_(m.bias, std=0.02)

    def forward(self, input_ids, attention_mask):
        seq = input_ids.shape[1]
        positions = torch.arange(seq, dtype=torch.int64).unsqueeze(0)
        x = self.word(input_ids) + self.position(positions) + self.token_type.weight[0]
        x = self.embedding_norm(x)
        # 1 keeps a token, 0 masks it: masked keys get a large negative score.
        mask_bias = (1.0 - attention_mask.to(torch.float32))[:, None, None, :] * -10000.0
        for layer in self.layers:
            x = layer(x, mask_bias)
        return x


def calibrate_batchnorm(model, image_size=224, batches=2, batch=8):
    """Sets BatchNorm running statistics from random images (cumulative average), leaving weights as they are."""
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.reset_running_stats()
            m.momentum = None
    model.train()
    with torch.no_grad():
        for _ in range(batches):
            model(torch.randn(batch, 3, image_size, image_size))
    model.eval()


def build(name, calibrate=True):
    """Returns (module in eval mode, input names, output names). Without calibrate, BatchNorm statistics are left
    at their defaults (for a caller that loads a saved state dict)."""
    import torchvision

    torch.manual_seed(SEED)
    if name == "resnet50":
        model = torchvision.models.resnet50(weights=None)
        if calibrate:
            calibrate_batchnorm(model)
        return model.eval(), ["input"], ["logits"]
    if name == "mobilenetv2":
        model = torchvision.models.mobilenet_v2(weights=None)
        if calibrate:
            calibrate_batchnorm(model)
        return model.eval(), ["input"], ["logits"]
    if name == "bert":
        return BertEncoder().eval(), ["input_ids", "attention_mask"], ["last_hidden_state"]
    raise ValueError(f"unknown model '{name}' (resnet50, mobilenetv2, bert)")


def make_inputs(name, batch):
    """The benchmark's inputs for a model and batch size, from a fixed seed: {name: tensor}."""
    gen = torch.Generator().manual_seed(SEED + batch)
    if name == "bert":
        ids = torch.randint(0, VOCAB, (batch, SEQUENCE), generator=gen, dtype=torch.int64)
        # Row i keeps the first SEQUENCE - 8 * i tokens (row 0 is unpadded), like a padded batch of sentences.
        mask = torch.ones(batch, SEQUENCE, dtype=torch.int64)
        for i in range(batch):
            mask[i, SEQUENCE - 8 * i :] = 0
        return {"input_ids": ids, "attention_mask": mask}
    return {"input": torch.randn(batch, 3, 224, 224, generator=gen)}
