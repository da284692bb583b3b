"""The batched torch ops that apply an nnU-Net augmentation Plan, on the batch's device: the
twin of trainer/augment_apply.cpp, op for op.

Each transform computes only the samples it picked, then writes them back over their rows
(index_copy of distinct rows: deterministic on every device).
"""

import math

import torch
import torch.nn.functional as F

from . import _nnunet as N


def upload(v, dtype, device):
    """Host values as a tensor on `device`. On CUDA they travel through pinned memory by a
    non-blocking copy: a copy from pageable memory first waits for everything queued on the
    stream (the previous step's backward pass), which would stall the host every batch."""
    t = torch.tensor(v, dtype=dtype)
    if torch.device(device).type != "cuda":
        return t.to(device)
    return t.pin_memory().to(device, non_blocking=True)


def _longs(v, device):
    return upload(v, torch.long, device)


def _floats(v, device):
    return upload(v, torch.float32, device)


def _picked(pick):
    return [i for i, p in enumerate(pick) if p]


def _rows(x, idx):
    return x.index_select(0, _longs(idx, x.device))


def _merge(x, idx, y):
    """A new tensor: x with rows idx[k] replaced by y[k] (distinct rows, so the copy is
    deterministic on every device)."""
    if len(idx) == x.size(0):
        return y
    return x.index_copy(0, _longs(idx, x.device), y)


def _on_picked(x, pick, fn, owned=False):
    """fn applied to the picked rows of x. owned: x is this call's own tensor, so the rows
    are written back in place (index_copy_ of distinct rows: deterministic), not merged
    into a new batch."""
    idx = _picked(pick)
    if not idx:
        return x
    if len(idx) == x.size(0):
        return fn(x, idx)
    y = fn(_rows(x, idx), idx)
    if owned:
        return x.index_copy_(0, _longs(idx, x.device), y)
    return _merge(x, idx, y)


def _broadcast_shape(x, n, channels):
    shape = [1] * x.dim()
    shape[0], shape[1] = n, channels
    return shape


def _channel_values(values, idx, channels, x):
    out = [values[s * channels + c] for s in idx for c in range(channels)]
    return _floats(out, x.device).view(_broadcast_shape(x, len(idx), channels))


# Reductions over the spatial axes one axis at a time (last first), as the C++ twin does,
# so results do not depend on the thread count.
def _spatial_mean(x):
    s = x
    for d in range(x.dim() - 1, 1, -1):
        s = s.sum(d, keepdim=True)
    return s / float(x[0][0].numel())


def _spatial_std(x, mean):
    s = (x - mean).square()
    for d in range(x.dim() - 1, 1, -1):
        s = s.sum(d, keepdim=True)
    return (s / float(max(x[0][0].numel() - 1, 1))).sqrt()


def _spatial_min(x):
    s = x
    for d in range(x.dim() - 1, 1, -1):
        s = s.min(d, keepdim=True)[0]
    return s


def _spatial_max(x):
    s = x
    for d in range(x.dim() - 1, 1, -1):
        s = s.max(d, keepdim=True)[0]
    return s


def _reflect(k, n):
    if n == 1:
        return 0
    period = 2 * (n - 1)
    k = k % period
    return k if k < n else period - k


def _blur_axis(x, dim, sigma):
    """Separable Gaussian blur along `dim`, sigma per (row, channel), cut at 3 sigma,
    borders reflected."""
    largest = max(sigma)
    if largest <= 0:
        return x
    r = int(math.ceil(3 * largest))
    taps, length, rows = 2 * r + 1, x.size(dim), len(sigma)
    w = [0.0] * (taps * rows)
    for i, s in enumerate(sigma):
        if s <= 0:
            w[r * rows + i] = 1.0
            continue
        ri = int(math.ceil(3 * s))
        total = sum(math.exp(-0.5 * float(t * t) / (s * s)) for t in range(-ri, ri + 1))
        for t in range(-ri, ri + 1):
            w[(t + r) * rows + i] = math.exp(-0.5 * float(t * t) / (s * s)) / total
    shape = _broadcast_shape(x, x.size(0), x.size(1))
    weights = _floats(w, x.device).view(taps, x.size(0) * x.size(1))
    padded = x.index_select(dim, _longs([_reflect(k, length) for k in range(-r, length + r)], x.device))
    out = padded.narrow(dim, 0, length) * weights[0].view(shape)
    for t in range(1, taps):
        out = out + padded.narrow(dim, t, length) * weights[t].view(shape)
    return out


def _lround(v):
    r = math.floor(v)
    return int(r + 1) if v - r >= 0.5 else int(r)


def _low_res_axis(x, dim, factor):
    """Nearest downsampling of each row along `dim` by its factor, then linear upsampling
    back (align_corners false)."""
    length, rows = x.size(dim), len(factor)
    i0, i1, w1 = [0] * (rows * length), [0] * (rows * length), [0.0] * (rows * length)
    for row, f in enumerate(factor):
        m = max(1, _lround(float(length) * f))
        for k in range(length):
            at = row * length + k
            if f == 1 or m == length:
                i0[at] = i1[at] = k
                continue
            u = max(0.0, (k + 0.5) * float(m) / float(length) - 0.5)
            lo = min(int(math.floor(u)), m - 1)
            hi = min(lo + 1, m - 1)
            i0[at] = min(int(math.floor((lo + 0.5) * float(length) / float(m))), length - 1)
            i1[at] = min(int(math.floor((hi + 0.5) * float(length) / float(m))), length - 1)
            w1[at] = u - float(lo)
    shape = _broadcast_shape(x, x.size(0), x.size(1))
    shape[dim] = length
    a = _longs(i0, x.device).view(shape).expand(x.shape)
    b = _longs(i1, x.device).view(shape).expand(x.shape)
    w = _floats(w1, x.device).view(shape)
    return x.gather(dim, a) * (1 - w) + x.gather(dim, b) * w


def _gamma(x, gamma, inverted):
    if inverted:
        x = -x
    mean = _spatial_mean(x)
    std = _spatial_std(x, mean)
    lo = _spatial_min(x)
    span = _spatial_max(x) - lo
    y = ((x - lo) / span.clamp_min(1e-7)).pow(gamma) * span + lo
    y_mean = _spatial_mean(y)
    y = (y - y_mean) * (std / _spatial_std(y, y_mean).clamp_min(1e-7)) + mean
    return -y if inverted else y


def hash_normal(shape, seed, dtype, device):
    """Standard normal noise from a counter-based hash of (seed, element index) by
    Box-Muller: the same values for any thread count and on any device."""
    n = 1
    for d in shape:
        n *= d
    if n >= 1 << 32:
        raise ValueError(f"augmentation: noise of {n} elements is too large")
    mask = 0xFFFFFFFF

    def mix(x):  # 32-bit values: products stay below 2^59
        for _ in range(2):
            x = (((x >> 16) ^ x) * 0x45D9F3B) & mask
        return (x >> 16) ^ x

    def key(k):
        return ((seed >> (16 * k)) & 0xFFFF) * 0x10001

    i = torch.arange(n, dtype=torch.long, device=device)

    def uniform(k):
        h = mix(mix(i ^ key(k)) ^ (key(k + 1) ^ 0x5BD1E995))
        return (h.to(dtype) + 0.5) * (1.0 / 4294967296.0)

    u1, u2 = uniform(0), uniform(2)
    return ((-2 * u1.log()).sqrt() * (u2 * (2 * math.pi)).cos()).view(shape)


def _spatial_matrix(angles, scale, rank, in_plane):
    """Output offset p (voxels from the patch centre, array axis order) samples the input
    at M p."""
    m = [[1.0 if r == c else 0.0 for c in range(rank)] for r in range(rank)]

    def rotate(i, j, a):
        for r in range(rank):
            u, v = m[r][i], m[r][j]
            m[r][i] = u * math.cos(a) + v * math.sin(a)
            m[r][j] = -u * math.sin(a) + v * math.cos(a)

    if rank == 2:
        rotate(0, 1, angles[0])
    else:
        rotate(1, 2, angles[0])
        if not in_plane:
            rotate(0, 2, angles[1])
            rotate(0, 1, angles[2])
    for r in range(rank):
        for c in range(rank):
            m[r][c] *= 1.0 if (in_plane and c == 0) else scale
    return m


def theta(maps, size_in, size_out, device):
    """affine_grid's theta [n, rank, rank + 1] for per-sample maps (A, t): output offset o
    (voxels from the centre, array axis order) samples the input at A o + t. Grid axes run
    x, y(, z), the array axes reversed, in units of each axis' half size."""
    rank, out = len(size_in), []
    for a, t in maps:
        for g in range(rank):
            i = rank - 1 - g
            out += [a[i][rank - 1 - h] * float(size_out[rank - 1 - h]) / float(size_in[i]) for h in range(rank)]
            out.append(2 * t[i] / size_in[i])
    return _floats(out, device).view(len(maps), rank, rank + 1)


def beyond_centres(grid, size_in):
    """Points of `grid` [n, spatial..., rank] (grid_sample's, align_corners false) beyond the
    input's outermost voxel centres along some axis of sizes `size_in`: [n, spatial...]."""
    rank, out = len(size_in), None
    for g in range(rank):  # grid axes run x, y(, z): array axes reversed
        half = 1.0 / size_in[rank - 1 - g]
        c = grid.select(-1, g)
        beyond = (c < -1 + half) | (c > 1 - half)
        out = beyond if out is None else out | beyond
    return out


def linear_labels(m, grid, size_in):
    """nnU-Net's label resampling (batchgeneratorsv2 SpatialTransform, mode_seg "bilinear":
    each label's one-hot map, times 1000, sampled linearly and rounded to float16; the
    largest wins, the lowest label on ties, as argmax) of label maps m [n, K, spatial...]
    on `grid`, each channel on its own, from each point's 2^rank corner voxels: a label's
    value is 1000 times the bilinear weight of the corners that hold it, so no list of the
    labels (and no wait for the device) is needed."""
    rank, corners = len(size_in), 1 << len(size_in)
    u = [((grid.select(-1, rank - 1 - a) + 1) * float(size_in[a]) - 1) / 2 for a in range(rank)]
    low = [v.floor() for v in u]
    flat = m.reshape(m.size(0), m.size(1), -1)
    labels, values = [], []
    for j in range(corners):  # corner bits: axis 0 highest
        index = torch.zeros_like(low[0], dtype=torch.long)
        inside = torch.ones_like(low[0], dtype=torch.bool)
        weight = None
        for g in range(rank):  # weights multiplied x first, as grid_sample's
            a = rank - 1 - g
            w = u[a] - low[a] if (j >> g) & 1 else low[a] + 1 - u[a]
            weight = w if weight is None else weight * w
        for a in range(rank):
            i = low[a] + float((j >> (rank - 1 - a)) & 1)
            inside = inside & (i >= 0) & (i <= float(size_in[a] - 1))
            index = index * size_in[a] + i.clamp(0, float(size_in[a] - 1)).long()
        at = index.reshape(m.size(0), 1, -1).expand(-1, m.size(1), -1)
        labels.append(flat.gather(2, at).view(m.shape[:2] + index.shape[1:]))
        values.append((weight * 1000).masked_fill(~inside, 0).unsqueeze(1))
    best = out = None
    for j in range(corners):
        v = torch.zeros_like(values[j])
        for i in range(corners):
            v = v + values[i] * (labels[i] == labels[j])
        v = v.half()
        if best is None:
            best, out = v, labels[j]
            continue
        better = (v > best) | ((v == best) & (labels[j] < out))
        out = torch.where(better, labels[j], out)
        best = torch.maximum(best, v)
    return out


def resample_labels(m, grid, size_in, mode, pad):
    """Label maps m [n, K, spatial...] (int64) on `grid`, each channel on its own: as nnU-Net
    does ("linear", linear_labels) or by nearest neighbour. Points beyond the input's
    outermost voxel centres take `pad` (int64 [1, K, 1...])."""
    if mode == "linear":
        out = linear_labels(m, grid, size_in)
    else:
        out = F.grid_sample(m.float(), grid, mode="nearest", padding_mode="zeros", align_corners=False).round().long()
    return torch.where(beyond_centres(grid, size_in).unsqueeze(1), pad, out)


def mask_image(x, beyond, channels):
    """x [B, C, spatial...] with `channels` set to 0 where `beyond` [B, spatial...]."""
    if not channels:
        return x
    pick = [0] * x.size(1)
    for c in channels:
        if not 0 <= c < x.size(1):
            raise ValueError(f"augmentation: masked channel {c} of an image of {x.size(1)}")
        pick[c] = 1
    which = _longs(pick, x.device).view(_broadcast_shape(x, 1, x.size(1))) != 0
    return x.masked_fill(beyond.unsqueeze(1) & which, 0)


def sample_labels(sample, labels, pad):
    """Label maps resampled by nearest neighbour with `pad` outside: sampling labels - pad
    with zero padding, then adding pad back. In the labels' dtype."""
    return (sample((labels.long() - pad).float(), "nearest").round().long() + pad).to(labels.dtype)


def _rotate_scale_crop(image, mask, plan, geometry, image_pad, mask_mode, outside):
    """The batch cropped to the patch, as new tensors (the input is left alone); samples
    that rotate or scale are resampled instead, drawing on the margin."""
    margin, rank = geometry.margin, len(geometry.margin)
    size_in = [image.size(a + 2) for a in range(rank)]
    size_out = [size_in[a] - 2 * margin[a] for a in range(rank)]
    x, m = image, mask
    for a in range(rank):
        if size_out[a] < 1:
            raise ValueError(f"augmentation: input size {size_in[a]} leaves nothing inside a margin of {margin[a]}")
        x = x.narrow(a + 2, margin[a], size_out[a])
        if m is not None:
            m = m.narrow(a + 2, margin[a], size_out[a])
    x = x.clone(memory_format=torch.contiguous_format)
    m = m.clone(memory_format=torch.contiguous_format) if m is not None else None
    pick = [plan.applied[N.ROTATE][s] or plan.applied[N.SCALE][s] for s in range(plan.batch)]
    idx = _picked(pick)
    if not idx:
        return x, m
    maps = [(_spatial_matrix(plan.angles[s], plan.scale[s], rank, geometry.in_plane), [0.0] * rank) for s in idx]
    grid = F.affine_grid(theta(maps, size_in, size_out, image.device), [len(idx), 1] + size_out, align_corners=False)
    rows = _longs(idx, image.device)

    def sample(v, mode):
        return F.grid_sample(v, grid, mode=mode, padding_mode="zeros", align_corners=False)

    # Sampling x - pad with zero padding, then adding pad back, pads with `pad`.
    picked = image.index_select(0, rows)
    y = sample(picked - image_pad, "bilinear") + image_pad if image_pad != 0 else sample(picked, "bilinear")
    x.index_copy_(0, rows, y)
    if m is not None:
        m.index_copy_(0, rows, resample_labels(mask.index_select(0, rows), grid, size_in, mask_mode, outside))
    return x, m


def _per_channel(value, mask):
    """One value, or one per channel, as int64 [1, K, 1...] for broadcasting over `mask`."""
    values = [value] * mask.size(1) if isinstance(value, int) else list(value)
    return _longs(values, mask.device).view(_broadcast_shape(mask, 1, mask.size(1)))


def apply(image, mask, plan, geometry, image_pad=0.0, label_pad=-1, mask_mode="linear", ignore_label=None,
          mask_image_channels=()):
    """image float [B, C, spatial...], mask integer [B, K, spatial...] or None (each of its
    K channels moves like a label map; label_pad and ignore_label: one value, or one per
    channel, as the mask's values read in int64; ignore_label None: background 0). Mask
    voxels outside the labelled data (label_pad, any negative label) set the image channels
    `mask_image_channels` to 0 where the mask's first channel has them, and end as
    ignore_label. Returns new tensors, the margin cropped off, the mask in its dtype."""
    rank = len(geometry.patch)
    c = plan.channels

    def per_row(idx, value):
        return [value(s * c + k) for s in idx for k in range(c)]

    m = outside = None
    if mask is not None:  # outside the labelled data is negative from here on
        pad = _per_channel(label_pad, mask)
        m = mask.long()
        m = m.masked_fill((pad >= 0) & (m == pad), -1)
        outside = pad.masked_fill(pad >= 0, -1)
    # New tensors that the transforms below update in place (the C++ twin merges into new
    # tensors instead: the same values, more copies).
    x, m = _rotate_scale_crop(image, m, plan, geometry, image_pad, mask_mode, outside)

    def noise(xi, idx):  # one field per channel, one std per sample
        sigma = _floats([plan.noise_sigma[s] for s in idx], xi.device).view([len(idx)] + [1] * (xi.dim() - 1))
        return xi + hash_normal(list(xi.shape), plan.noise_seed, xi.dtype, xi.device) * sigma

    def blur(xi, idx):
        for a in range(rank):
            xi = _blur_axis(xi, a + 2, per_row(idx, lambda k: plan.blur_sigma[k][a]))
        return xi

    def contrast(xi, idx):
        f = _channel_values(plan.contrast, idx, c, xi)
        mean = _spatial_mean(xi)
        y = torch.maximum(torch.minimum((xi - mean) * f + mean, _spatial_max(xi)), _spatial_min(xi))
        return torch.where(f != 1, y, xi)

    def low_res(xi, idx):
        f = per_row(idx, lambda k: plan.low_res[k])
        for a in range(1 if geometry.in_plane else 0, rank):
            xi = _low_res_axis(xi, a + 2, f)
        return xi

    def gamma(values, inverted):
        def fn(xi, idx):
            g = _channel_values(values, idx, c, xi)
            return torch.where(g != 1, _gamma(xi, g, inverted), xi)
        return fn

    x = _on_picked(x, plan.applied[N.NOISE], noise, True)
    x = _on_picked(x, plan.applied[N.BLUR], blur, True)
    x = _on_picked(x, plan.applied[N.BRIGHTNESS], lambda xi, idx: xi * _channel_values(plan.brightness, idx, c, xi),
                   True)
    x = _on_picked(x, plan.applied[N.CONTRAST], contrast, True)
    x = _on_picked(x, plan.applied[N.LOWRES], low_res, True)
    x = _on_picked(x, plan.applied[N.GAMMA_INV], gamma(plan.gamma_inverted, True), True)
    x = _on_picked(x, plan.applied[N.GAMMA], gamma(plan.gamma, False), True)
    for a in range(rank):
        flip = [plan.mirror[s][a] for s in range(plan.batch)]
        x = _on_picked(x, flip, lambda xi, idx: xi.flip(a + 2), True)
        if m is not None:
            m = _on_picked(m, flip, lambda mi, idx: mi.flip(a + 2), True)
    if m is None:
        return x.contiguous(), None
    beyond = m < 0  # nnU-Net's MaskImageTransform, then RemoveLabelTansform(-1, 0)
    x = mask_image(x, beyond[:, 0], mask_image_channels)
    m = torch.where(beyond, _per_channel(0 if ignore_label is None else ignore_label, m), m)
    return x.contiguous(), m.to(mask.dtype).contiguous()
