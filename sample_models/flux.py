"""Flux-like block stack: the Flux.1 rectified-flow transformer (double-stream then single-stream blocks)."""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Config:
    in_channels: int = 64          # a 16-channel VAE latent packed into 2x2 patches
    context_in_dim: int = 4096     # T5-XXL text encoder width
    vec_in_dim: int = 768          # CLIP pooled text embedding width
    hidden_size: int = 3072
    num_heads: int = 24            # head_dim 128
    mlp_ratio: float = 4.0
    depth: int = 19                # double-stream blocks: separate weights for image and text tokens
    depth_single_blocks: int = 38  # single-stream blocks: one set of weights over the joined sequence
    qkv_bias: bool = True
    guidance_embed: bool = True    # Flux.1 [dev] is guidance-distilled: the guidance scale is an input
    theta: int = 10_000            # RoPE base
    img_tokens: int = 4096         # a 1024x1024 image: 128x128 latent, 2x2 patches
    txt_tokens: int = 512
    graph_break: bool = False      # put a deliberate graph break in every block, for the workshop


presets = {
    "tiny": dict(in_channels=64, context_in_dim=64, vec_in_dim=32, hidden_size=64, num_heads=4,
                 depth=2, depth_single_blocks=2, img_tokens=64, txt_tokens=16),
    "medium": dict(in_channels=64, context_in_dim=4096, vec_in_dim=768, hidden_size=1536, num_heads=12,
                   depth=4, depth_single_blocks=8, img_tokens=1024, txt_tokens=256),
    "full": dict(in_channels=64, context_in_dim=4096, vec_in_dim=768, hidden_size=3072, num_heads=24,
                 depth=19, depth_single_blocks=38, img_tokens=4096, txt_tokens=512),
}


def timestep_embedding(t, dim, max_period=10_000, time_factor=1000.0):
    # Sinusoidal features of t in [0, 1], as in DiT/Flux; time_factor spreads t over the frequency range
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32, device=t.device) / half)
    args = time_factor * t[:, None].float() * freqs[None]  # (B, dim/2)
    # computed in float32, handed on in t's dtype (as Flux does), so bf16 weights get bf16 inputs
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1).to(t.dtype)  # (B, dim)


def rope(pos, dim, theta):
    # Real-valued cos/sin tables rather than complex numbers: simpler to read and to compile
    freqs = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float32, device=pos.device) / dim)
    angles = pos.float()[:, None] * freqs[None]  # (L, dim/2)
    return angles.cos(), angles.sin()


def apply_rope(x, cos, sin):  # x: (B, H, L, D), cos/sin: (L, D/2)
    x1, x2 = x.float().chunk(2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).type_as(x)


def attention(q, k, v, pe):  # (B, H, L, D) each
    q, k = apply_rope(q, *pe), apply_rope(k, *pe)
    x = F.scaled_dot_product_attention(q, k, v)
    return x.transpose(1, 2).flatten(2)  # (B, L, H*D)


class MLPEmbedder(nn.Module):
    """Two-layer MLP that turns a conditioning vector into a hidden-size embedding."""

    def __init__(self, in_dim: int, hidden_dim: int):
        super().__init__()
        self.in_layer = nn.Linear(in_dim, hidden_dim)
        self.out_layer = nn.Linear(hidden_dim, hidden_dim)

    def forward(self, x):
        return self.out_layer(F.silu(self.in_layer(x)))


class RMSNorm(nn.Module):
    """RMSNorm with a learned scale, computed in float32 whatever the input dtype."""

    def __init__(self, dim: int):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        rrms = torch.rsqrt(torch.mean(x.float() ** 2, dim=-1, keepdim=True) + 1e-6)
        return (x.float() * rrms).to(x.dtype) * self.scale


class QKNorm(nn.Module):
    """Normalises queries and keys per head, which keeps attention logits bounded at this scale."""

    def __init__(self, dim: int):
        super().__init__()
        self.query_norm = RMSNorm(dim)
        self.key_norm = RMSNorm(dim)

    def forward(self, q, k, v):
        # back to v's dtype: the float32 scale would otherwise promote q and k under autocast
        return self.query_norm(q).to(v.dtype), self.key_norm(k).to(v.dtype)


class Modulation(nn.Module):
    """adaLN: the conditioning vector predicts per-channel shift, scale and gate (two sets when double)."""

    def __init__(self, dim: int, double: bool):
        super().__init__()
        self.multiplier = 6 if double else 3
        self.lin = nn.Linear(dim, self.multiplier * dim)

    def forward(self, vec):  # (B, C) -> multiplier x (B, 1, C), broadcast over tokens
        return self.lin(F.silu(vec))[:, None, :].chunk(self.multiplier, dim=-1)


class SelfAttention(nn.Module):
    """Holds one stream's attention weights; DoubleStreamBlock runs the joint attention itself."""

    def __init__(self, dim: int, num_heads: int, qkv_bias: bool):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim, bias=qkv_bias)
        self.norm = QKNorm(dim // num_heads)
        self.proj = nn.Linear(dim, dim)


def stream_mlp(hidden_size: int, mlp_hidden: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(hidden_size, mlp_hidden), nn.GELU(approximate="tanh"),
                         nn.Linear(mlp_hidden, hidden_size))


class DoubleStreamBlock(nn.Module):
    """Image and text tokens keep separate weights but attend jointly over the concatenated sequence."""

    def __init__(self, cfg: Config):
        super().__init__()
        h, mlp_hidden = cfg.hidden_size, int(cfg.hidden_size * cfg.mlp_ratio)
        self.num_heads = cfg.num_heads
        self.graph_break = cfg.graph_break
        self.img_mod = Modulation(h, double=True)
        self.img_norm1 = nn.LayerNorm(h, elementwise_affine=False, eps=1e-6)  # affine comes from modulation
        self.img_attn = SelfAttention(h, cfg.num_heads, cfg.qkv_bias)
        self.img_norm2 = nn.LayerNorm(h, elementwise_affine=False, eps=1e-6)
        self.img_mlp = stream_mlp(h, mlp_hidden)
        self.txt_mod = Modulation(h, double=True)
        self.txt_norm1 = nn.LayerNorm(h, elementwise_affine=False, eps=1e-6)
        self.txt_attn = SelfAttention(h, cfg.num_heads, cfg.qkv_bias)
        self.txt_norm2 = nn.LayerNorm(h, elementwise_affine=False, eps=1e-6)
        self.txt_mlp = stream_mlp(h, mlp_hidden)

    def qkv(self, x, norm, shift, scale, attn):  # (B, L, C) -> 3 x (B, H, L, D)
        x = (1 + scale) * norm(x) + shift
        q, k, v = attn.qkv(x).unflatten(-1, (3, self.num_heads, -1)).permute(2, 0, 3, 1, 4)
        q, k = attn.norm(q, k, v)
        return q, k, v

    def forward(self, img, txt, vec, pe):  # img: (B, N_img, C), txt: (B, N_txt, C), vec: (B, C)
        if self.graph_break:
            # Deliberate graph break: .item() hands a tensor value to Python and the `if` branches on it,
            # which dynamo cannot put in a graph. Real activations never get near 1e4, so results are unchanged.
            if img.abs().mean().item() > 1e4:
                img = img.clamp(-1e4, 1e4)
        img_shift1, img_scale1, img_gate1, img_shift2, img_scale2, img_gate2 = self.img_mod(vec)
        txt_shift1, txt_scale1, txt_gate1, txt_shift2, txt_scale2, txt_gate2 = self.txt_mod(vec)

        img_q, img_k, img_v = self.qkv(img, self.img_norm1, img_shift1, img_scale1, self.img_attn)
        txt_q, txt_k, txt_v = self.qkv(txt, self.txt_norm1, txt_shift1, txt_scale1, self.txt_attn)
        # text first, matching the order of the RoPE positions
        attn = attention(torch.cat((txt_q, img_q), dim=2), torch.cat((txt_k, img_k), dim=2),
                         torch.cat((txt_v, img_v), dim=2), pe)  # (B, N_txt + N_img, C)
        txt_attn, img_attn = attn[:, : txt.shape[1]], attn[:, txt.shape[1]:]

        img = img + img_gate1 * self.img_attn.proj(img_attn)
        img = img + img_gate2 * self.img_mlp((1 + img_scale2) * self.img_norm2(img) + img_shift2)
        txt = txt + txt_gate1 * self.txt_attn.proj(txt_attn)
        txt = txt + txt_gate2 * self.txt_mlp((1 + txt_scale2) * self.txt_norm2(txt) + txt_shift2)
        return img, txt


class SingleStreamBlock(nn.Module):
    """One set of weights over the joined text+image sequence; attention and MLP run in parallel off one matmul."""

    def __init__(self, cfg: Config):
        super().__init__()
        h = self.hidden_size = cfg.hidden_size
        self.num_heads = cfg.num_heads
        self.mlp_hidden = int(h * cfg.mlp_ratio)
        self.graph_break = cfg.graph_break
        self.modulation = Modulation(h, double=False)
        self.pre_norm = nn.LayerNorm(h, elementwise_affine=False, eps=1e-6)
        # one wide matmul produces q, k, v and the MLP input; another consumes attention and MLP outputs together
        self.linear1 = nn.Linear(h, 3 * h + self.mlp_hidden)
        self.norm = QKNorm(h // cfg.num_heads)
        self.linear2 = nn.Linear(h + self.mlp_hidden, h)

    def forward(self, x, vec, pe):  # x: (B, L, C), vec: (B, C)
        if self.graph_break:
            # Deliberate graph break (see DoubleStreamBlock): a data-dependent Python branch on .item().
            if x.abs().mean().item() > 1e4:
                x = x.clamp(-1e4, 1e4)
        shift, scale, gate = self.modulation(vec)
        x_mod = (1 + scale) * self.pre_norm(x) + shift
        qkv, mlp = self.linear1(x_mod).split([3 * self.hidden_size, self.mlp_hidden], dim=-1)
        q, k, v = qkv.unflatten(-1, (3, self.num_heads, -1)).permute(2, 0, 3, 1, 4)  # 3 x (B, H, L, D)
        q, k = self.norm(q, k, v)
        out = self.linear2(torch.cat((attention(q, k, v, pe), F.gelu(mlp, approximate="tanh")), dim=-1))
        return x + gate * out


class LastLayer(nn.Module):
    """Modulated final norm and projection from hidden size back to latent channels."""

    def __init__(self, hidden_size: int, out_channels: int):
        super().__init__()
        self.norm_final = nn.LayerNorm(hidden_size, elementwise_affine=False, eps=1e-6)
        self.adaLN_modulation = nn.Sequential(nn.SiLU(), nn.Linear(hidden_size, 2 * hidden_size))
        self.linear = nn.Linear(hidden_size, out_channels)

    def forward(self, x, vec):  # x: (B, N_img, C), vec: (B, C)
        shift, scale = self.adaLN_modulation(vec)[:, None, :].chunk(2, dim=-1)
        return self.linear((1 + scale) * self.norm_final(x) + shift)  # (B, N_img, out_channels)


class Flux(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.cfg = cfg
        h = cfg.hidden_size
        self.img_in = nn.Linear(cfg.in_channels, h)
        self.time_in = MLPEmbedder(256, h)
        self.vector_in = MLPEmbedder(cfg.vec_in_dim, h)
        self.guidance_in = MLPEmbedder(256, h) if cfg.guidance_embed else None
        self.txt_in = nn.Linear(cfg.context_in_dim, h)
        self.double_blocks = nn.ModuleList(DoubleStreamBlock(cfg) for _ in range(cfg.depth))
        self.single_blocks = nn.ModuleList(SingleStreamBlock(cfg) for _ in range(cfg.depth_single_blocks))
        self.final_layer = LastLayer(h, cfg.in_channels)

    def forward(self, img, txt, y, timesteps, guidance):
        # img: (B, N_img, in_channels), txt: (B, N_txt, context_in_dim), y: (B, vec_in_dim), timesteps/guidance: (B,)
        img, txt = self.img_in(img), self.txt_in(txt)  # (B, N, C)
        vec = self.time_in(timestep_embedding(timesteps, 256)) + self.vector_in(y)  # (B, C)
        if self.guidance_in is not None:
            vec = vec + self.guidance_in(timestep_embedding(guidance, 256))

        # 1-D RoPE: text tokens all sit at position 0 (as Flux's txt_ids do), image tokens in raster order
        n_txt, n_img = txt.shape[1], img.shape[1]
        pos = torch.cat([torch.zeros(n_txt, device=img.device), torch.arange(n_img, device=img.device)])
        pe = rope(pos, self.cfg.hidden_size // self.cfg.num_heads, self.cfg.theta)

        for block in self.double_blocks:
            img, txt = block(img, txt, vec, pe)
        x = torch.cat((txt, img), dim=1)  # (B, N_txt + N_img, C)
        for block in self.single_blocks:
            x = block(x, vec, pe)
        return self.final_layer(x[:, n_txt:], vec)  # (B, N_img, in_channels)


def make_batch(cfg: Config, batch_size: int, *, device, seq_len, generator):
    n_img = cfg.img_tokens if seq_len is None else seq_len
    shape = (batch_size, n_img, cfg.in_channels)
    # Rectified flow: the model sees a point on the straight line from data x0 (t=0) to noise (t=1)
    # and is trained to predict the line's velocity, noise - x0
    x0 = torch.randn(shape, device=device, generator=generator)
    noise = torch.randn(shape, device=device, generator=generator)
    t = torch.rand(batch_size, device=device, generator=generator)
    img = (1 - t[:, None, None]) * x0 + t[:, None, None] * noise
    txt = torch.randn(batch_size, cfg.txt_tokens, cfg.context_in_dim, device=device, generator=generator)
    y = torch.randn(batch_size, cfg.vec_in_dim, device=device, generator=generator)
    guidance = torch.full((batch_size,), 3.5, device=device)  # Flux.1 [dev]'s usual guidance scale
    return (img, txt, y, t, guidance), noise - x0


def loss(pred, target):
    # float(): under autocast the prediction may be bf16
    return F.mse_loss(pred.float(), target)
