"""Toy image captioner: a ViT encoder over image patches and a causal transformer decoder that cross-attends to them.

It writes a caption token by token with a KV cache (Captioner.prefill, then Captioner.decode once per token), static
as in gpt-fast (allocated once, written in place at the token's position) or dynamic (grown by concatenation)."""
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Config:
    image_size: int = 224
    patch_size: int = 16          # image_size must be a multiple: the encoder sees (image_size / patch_size)^2 tokens
    in_channels: int = 3
    dim: int = 768                # shared by encoder and decoder so cross-attention needs no projection
    n_head: int = 12
    n_enc_layers: int = 12
    n_dec_layers: int = 12
    mlp_ratio: int = 4
    vocab_size: int = 32000
    max_caption_len: int = 64     # size of the learned position table; captions may be any length up to this
    graph_break: bool = False     # put a deliberate graph break in every block, for the workshop


presets = {
    "tiny": dict(image_size=32, patch_size=8, dim=64, n_head=4, n_enc_layers=2, n_dec_layers=2,
                 vocab_size=512, max_caption_len=16),
    "small": dict(image_size=224, patch_size=16, dim=384, n_head=6, n_enc_layers=6, n_dec_layers=6,
                  vocab_size=8192, max_caption_len=32),
    "full": dict(image_size=224, patch_size=16, dim=768, n_head=12, n_enc_layers=12, n_dec_layers=12,
                 vocab_size=32000, max_caption_len=64),
}


@dataclass
class LayerCache:
    """One decoder block's cache: its self-attention's keys and values of the caption so far, and its
    cross-attention's keys and values of the image (computed once, by the prefill)."""

    k: torch.Tensor      # (B, H, L, D): L = the whole length if static, the tokens so far if dynamic
    v: torch.Tensor
    img_k: torch.Tensor  # (B, H, N, D)
    img_v: torch.Tensor


@dataclass
class KVCache:
    static: bool
    layers: list[LayerCache] = field(default_factory=list)

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for layer in self.layers
                   for t in (layer.k, layer.v, layer.img_k, layer.img_v))


class Attention(nn.Module):
    """Multi-head attention of x over context (self-attention when context is x)."""

    def __init__(self, dim: int, n_head: int):
        super().__init__()
        self.n_head = n_head
        # q and kv are separate so the same module serves cross-attention, where kv comes from the image
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(dim, 2 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, context, is_causal=False):
        B, T, C = x.shape
        S = context.shape[1]
        q = self.q(x).view(B, T, self.n_head, -1).transpose(1, 2)                      # (B, H, T, D)
        k, v = self.kv(context).view(B, S, 2, self.n_head, -1).permute(2, 0, 3, 1, 4)  # 2 x (B, H, S, D)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)              # (B, H, T, D)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))                           # (B, T, C)

    def _heads(self, t, B, T):  # (B, T, C) -> (B, H, T, D)
        return t.view(B, T, self.n_head, -1).transpose(1, 2)

    def cached_self(self, x, layer: LayerCache, pos, static: bool):
        """Causal self-attention of new tokens at positions `pos` (T,) over the cached ones and themselves."""
        B, T, C = x.shape
        q = self._heads(self.q(x), B, T)
        k, v = self.kv(x).view(B, T, 2, self.n_head, -1).permute(2, 0, 3, 1, 4)
        if static:  # written in place, so every step sees tensors of the same shape at the same address
            layer.k.index_copy_(2, pos, k)
            layer.v.index_copy_(2, pos, v)
        else:
            layer.k, layer.v = torch.cat([layer.k, k], 2), torch.cat([layer.v, v], 2)
        # each token sees the positions up to its own; a static cache's unwritten slots lie beyond them
        mask = torch.arange(layer.k.shape[2], device=x.device) <= pos[:, None]          # (T, L)
        y = F.scaled_dot_product_attention(q, layer.k, layer.v, attn_mask=mask)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))

    def cached_cross(self, x, layer: LayerCache, img=None):
        """Cross-attention to the image: the prefill (img given) stores its keys and values, decode steps reuse them."""
        B, T, C = x.shape
        if img is not None:
            k, v = self.kv(img).view(B, img.shape[1], 2, self.n_head, -1).permute(2, 0, 3, 1, 4)
            layer.img_k.copy_(k)
            layer.img_v.copy_(v)
        y = F.scaled_dot_product_attention(self._heads(self.q(x), B, T), layer.img_k, layer.img_v)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


def mlp(cfg: Config) -> nn.Sequential:
    hidden = cfg.mlp_ratio * cfg.dim
    return nn.Sequential(nn.Linear(cfg.dim, hidden), nn.GELU(), nn.Linear(hidden, cfg.dim))


class EncoderBlock(nn.Module):
    """Pre-norm transformer block over image tokens: bidirectional self-attention, then MLP."""

    def __init__(self, cfg: Config):
        super().__init__()
        self.graph_break = cfg.graph_break
        self.norm1 = nn.LayerNorm(cfg.dim)
        self.attn = Attention(cfg.dim, cfg.n_head)
        self.norm2 = nn.LayerNorm(cfg.dim)
        self.mlp = mlp(cfg)

    def forward(self, x):  # (B, N, C)
        if self.graph_break:
            # Deliberate graph break: .item() hands a tensor value to Python and the `if` branches on it,
            # which dynamo cannot put in a graph. Real activations never get near 1e4, so results are unchanged.
            if x.abs().mean().item() > 1e4:
                x = x.clamp(-1e4, 1e4)
        h = self.norm1(x)
        x = x + self.attn(h, h)
        return x + self.mlp(self.norm2(x))


class DecoderBlock(nn.Module):
    """Pre-norm decoder block over caption tokens: causal self-attention, cross-attention to the image, MLP."""

    def __init__(self, cfg: Config):
        super().__init__()
        self.graph_break = cfg.graph_break
        self.norm1 = nn.LayerNorm(cfg.dim)
        self.self_attn = Attention(cfg.dim, cfg.n_head)
        self.norm2 = nn.LayerNorm(cfg.dim)
        self.cross_attn = Attention(cfg.dim, cfg.n_head)
        self.norm3 = nn.LayerNorm(cfg.dim)
        self.mlp = mlp(cfg)

    def forward(self, x, img):  # x: (B, T, C), img: (B, N, C)
        if self.graph_break:
            # Deliberate graph break (see EncoderBlock): a data-dependent Python branch on .item().
            if x.abs().mean().item() > 1e4:
                x = x.clamp(-1e4, 1e4)
        h = self.norm1(x)
        x = x + self.self_attn(h, h, is_causal=True)
        x = x + self.cross_attn(self.norm2(x), img)
        return x + self.mlp(self.norm3(x))

    def cached(self, x, layer: LayerCache, pos, static: bool, img=None):
        """forward() for new tokens at positions `pos`, with the block's KV cache (img only in the prefill)."""
        x = x + self.self_attn.cached_self(self.norm1(x), layer, pos, static)
        x = x + self.cross_attn.cached_cross(self.norm2(x), layer, img)
        return x + self.mlp(self.norm3(x))


class Captioner(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        n_patches = (cfg.image_size // cfg.patch_size) ** 2
        # A strided conv is the usual ViT patch embedding: one Linear applied to each non-overlapping patch
        self.patch_embed = nn.Conv2d(cfg.in_channels, cfg.dim, kernel_size=cfg.patch_size, stride=cfg.patch_size)
        self.img_pos = nn.Parameter(0.02 * torch.randn(1, n_patches, cfg.dim))
        self.encoder = nn.ModuleList(EncoderBlock(cfg) for _ in range(cfg.n_enc_layers))
        self.enc_norm = nn.LayerNorm(cfg.dim)

        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.pos_emb = nn.Embedding(cfg.max_caption_len, cfg.dim)
        self.decoder = nn.ModuleList(DecoderBlock(cfg) for _ in range(cfg.n_dec_layers))
        self.dec_norm = nn.LayerNorm(cfg.dim)
        self.lm_head = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)

    def encode(self, images):  # (B, 3, H, W) -> (B, N, C)
        img = self.patch_embed(images).flatten(2).transpose(1, 2) + self.img_pos
        for block in self.encoder:
            img = block(img)
        return self.enc_norm(img)

    def forward(self, images, tokens):  # images: (B, 3, H, W), tokens: (B, T)
        img = self.encode(images)
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.tok_emb(tokens) + self.pos_emb(pos)  # (B, T, C)
        for block in self.decoder:
            x = block(x, img)
        return self.lm_head(self.dec_norm(x))  # (B, T, vocab)


    def new_cache(self, batch_size: int, max_len: int, static: bool, dtype, device) -> KVCache:
        """An empty cache for captions of up to `max_len` tokens (a static one is allocated at that length)."""
        first = self.decoder[0].self_attn
        heads, head_dim, patches = first.n_head, self.tok_emb.embedding_dim // first.n_head, self.img_pos.shape[1]
        cache = KVCache(static)
        for _ in self.decoder:
            def empty(length):
                return torch.zeros(batch_size, heads, length, head_dim, dtype=dtype, device=device)
            cache.layers.append(LayerCache(empty(max_len if static else 0), empty(max_len if static else 0),
                                           empty(patches), empty(patches)))
        if static:  # fixed addresses: CUDA graphs replay on them without copying them in first
            for t in (t for layer in cache.layers for t in vars(layer).values()):
                torch._dynamo.mark_static_address(t)
        return cache

    def prefill(self, cache: KVCache, images, tokens):
        """Encode the image, read the prompt `tokens` (B, T) into the cache; the logits of the last one (B, vocab)."""
        return self._decode(cache, tokens, torch.arange(tokens.shape[1], device=tokens.device), self.encode(images))

    def decode(self, cache: KVCache, token, pos):
        """One new token (B, 1) at position `pos` (1,): its logits (B, vocab), its keys and values cached."""
        return self._decode(cache, token, pos, None)

    def _decode(self, cache, tokens, pos, img):
        x = self.tok_emb(tokens) + self.pos_emb(pos)  # (B, T, C)
        for block, layer in zip(self.decoder, cache.layers):
            x = block.cached(x, layer, pos, cache.static, img)
        return self.lm_head(self.dec_norm(x[:, -1]))


def make_batch(cfg: Config, batch_size: int, *, device, seq_len, generator):
    T = cfg.max_caption_len if seq_len is None else seq_len
    if not 1 <= T <= cfg.max_caption_len:
        raise ValueError(f"caption length must be in 1..{cfg.max_caption_len}, got {T}")
    images = torch.randn(batch_size, cfg.in_channels, cfg.image_size, cfg.image_size,
                         device=device, generator=generator)
    caption = torch.randint(cfg.vocab_size, (batch_size, T + 1), device=device, generator=generator)
    # Teacher forcing: the decoder reads tokens 0..T-1 and is scored on predicting tokens 1..T
    return (images, caption[:, :-1]), caption[:, 1:]


def loss(logits, target):
    # float(): under autocast the logits may be bf16, and cross-entropy wants full precision
    return F.cross_entropy(logits.float().flatten(0, 1), target.flatten())
