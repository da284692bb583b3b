"""nnU-Net v2's default training augmentation as batched torch ops: the Python twin of
reader/augment.{h,cpp} (the table and the draws) and trainer/augment_apply.cpp (the ops);
reader/augment_host.cpp applies the same plan sample by sample on the host.

All three draw the same parameters from (seed, epoch, step) and apply them with the same
operations, so `shardtrain --aug nnunet` and `T.preset("nnunet")` agree to float tolerance
(tests/trainer/augment_reference.cpp and python/tests/test_transforms.py hold them to it).
A change to one is a change to all.

Order (nnU-Net's): rotation and scaling (then the crop to the patch), Gaussian noise,
Gaussian blur, brightness, contrast, simulated low resolution, inverted gamma, gamma,
mirroring, masking of the image outside the labelled data, removal of the outside label.
Only the samples a transform picks are computed; channels it leaves alone keep their exact
values.

The releases matched: nnU-Net v2.8.1 (MIC-DKFZ/nnUNet@468cf803df9b267150ae2b6c0c59b8ac84f16227)
with the batchgeneratorsv2 it requires, 0.3.2 (MIC-DKFZ/batchgeneratorsv2@136ec30e32502ca2f6eeacfc2ff51f361b3146b1).
"""

import math
from collections import namedtuple

from ._draw import Rng

Info = namedtuple("Info", "name probability channel_probability lo hi split_at_one parameter source")

_NNU = "nnU-Net v2.8.1 nnUNetTrainer.get_training_transforms"
# One row per transform, in the order they run (mirroring last). Must equal the C++ table
# (reader/augment.cpp AugTransforms()); a test compares them.
TABLE = (
    Info("rotate", 0.2, 1.0, -30.0, 30.0, False,
         "degrees about each axis (2D and in-plane 3D: +-180, +-15 for 2D patches of aspect > 1.5)",
         _NNU + ": rotation_for_DA, p_rotation 0.2"),
    Info("scale", 0.2, 1.0, 0.7, 1.4, False, "zoom factor, all axes alike (> 1 shows more: objects smaller)",
         _NNU + ": scaling (0.7, 1.4), p_scaling 0.2, synchronized axes"),
    Info("noise", 0.1, 1.0, 0.0, 0.1, False, "std of added Gaussian noise, one field per channel",
         _NNU + ": GaussianNoiseTransform noise_variance (0, 0.1), p 0.1, synchronize_channels (one std; "
         "batchgeneratorsv2 0.3.2 draws a field per channel)"),
    Info("blur", 0.2, 0.5, 0.5, 1.0, False, "Gaussian sigma in voxels, per channel and axis",
         _NNU + ": GaussianBlurTransform blur_sigma (0.5, 1), p 0.2, p_per_channel 0.5"),
    Info("brightness", 0.15, 1.0, 0.75, 1.25, True, "multiplier per channel",
         _NNU + ": MultiplicativeBrightnessTransform (0.75, 1.25), p 0.15"),
    Info("contrast", 0.15, 1.0, 0.75, 1.25, True, "factor about the channel mean, clipped to its range",
         _NNU + ": ContrastTransform (0.75, 1.25), preserve_range, p 0.15"),
    Info("lowres", 0.25, 0.5, 0.5, 1.0, False, "downsampling factor (nearest down, linear up) per channel",
         _NNU + ": SimulateLowResolutionTransform scale (0.5, 1), p 0.25, p_per_channel 0.5"),
    Info("gamma_inv", 0.1, 1.0, 0.7, 1.5, True, "gamma of the inverted channel, mean and std kept",
         _NNU + ": GammaTransform (0.7, 1.5), p_invert_image 1, retain_stats, p 0.1"),
    Info("gamma", 0.3, 1.0, 0.7, 1.5, True, "gamma of the channel, mean and std kept",
         _NNU + ": GammaTransform (0.7, 1.5), p_invert_image 0, retain_stats, p 0.3"),
    Info("mirror", 0.5, 1.0, 0.0, 0.0, False, "flip, drawn for each spatial axis",
         _NNU + ": MirrorTransform allowed_axes all spatial axes"),
)
NAMES = tuple(t.name for t in TABLE)
ROTATE, SCALE, NOISE, BLUR, BRIGHTNESS, CONTRAST, LOWRES, GAMMA_INV, GAMMA, MIRROR = range(len(TABLE))
_PER_CHANNEL = {BRIGHTNESS: "brightness", CONTRAST: "contrast", LOWRES: "low_res", GAMMA_INV: "gamma_inverted",
                GAMMA: "gamma"}

MASK_MODES = ("linear", "nearest")  # how a rotated or scaled mask is resampled (linear: nnU-Net's)

_MARGIN_SCALE = 0.85  # margin = (patch bounding box under rotation) / 0.85 (nnU-Net's rule)
_ANISOTROPY = 3.0  # a 3D patch whose largest axis exceeds 3x its first is augmented in-plane


def probabilities(p):
    """nnU-Net's probabilities with the overrides of `p` ({name: P}, "all" sets every one)."""
    out = [t.probability for t in TABLE]
    for name, value in (p or {}).items():
        if name != "all" and name not in NAMES:
            raise ValueError(f"unknown augmentation transform {name!r}; known: {', '.join(NAMES)}, all")
        value = float(value)
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"augmentation probability {name}={value} is not in [0, 1]")
        for i, t in enumerate(TABLE):
            if name in ("all", t.name):
                out[i] = value
    return out


def mask_image_channels(zscore_region, normalize, channels):
    """The image channels nnU-Net masks (MaskImageTransform: use_mask_for_norm) for a dataset
    whose provenance holds `zscore_region` ("nonzero": every channel `normalize` lists as
    zscore, all of them when it lists one scheme or none; or one entry per channel:
    "nonzero", "all", "-"), for images of `channels` channels."""
    region = zscore_region.split(",") if zscore_region else []
    schemes = normalize.split(",") if normalize else []

    def entry(items, c, none):
        return none if not items else items[0] if len(items) == 1 else items[c] if c < len(items) else ""

    if len(region) > 1:
        return [c for c in range(channels) if entry(region, c, "") == "nonzero"]
    return [c for c in range(channels) if entry(region, c, "") == "nonzero" and entry(schemes, c, "zscore") == "zscore"]


def _rotated_extent(a, b, theta):
    theta = min(abs(theta), math.pi / 2)
    if math.atan2(b, a) <= theta:
        return math.hypot(a, b)
    return a * math.cos(theta) + b * math.sin(theta)


def _draw_value(rng, t):
    if t.split_at_one and t.lo < 1 and rng.coin():
        return rng.uniform(t.lo, 1.0)
    return rng.uniform(max(t.lo, 1.0) if t.split_at_one else t.lo, t.hi)


class Geometry:
    """What the patch size fixes: the rotation range, in-plane rotation, and the margin."""

    def __init__(self, patch, probability, margin):
        patch = [int(p) for p in patch]
        if len(patch) not in (2, 3) or min(patch) < 1:
            raise ValueError(f"augmentation needs a 2D or 3D patch of sizes >= 1, got {tuple(patch)}")
        self.patch = patch
        largest = max(patch)
        self.in_plane = False
        if len(patch) == 3:
            self.in_plane = largest / patch[0] > _ANISOTROPY
            self.max_angle = (180.0 if self.in_plane else TABLE[ROTATE].hi) * math.pi / 180
        else:
            self.max_angle = (15.0 if largest / min(patch) > 1.5 else 180.0) * math.pi / 180
        self.margin = [0] * len(patch)
        if not margin or (probability[ROTATE] <= 0 and probability[SCALE] <= 0):
            return
        theta = self.max_angle if probability[ROTATE] > 0 else 0.0
        first = 1 if self.in_plane else 0
        for i in range(first, len(patch)):
            extent = float(patch[i])
            for j in range(first, len(patch)):
                if j != i:
                    extent = max(extent, _rotated_extent(float(patch[i]), float(patch[j]), theta))
            self.margin[i] = int(math.ceil((extent / _MARGIN_SCALE - patch[i]) / 2))


class Plan:
    """The parameters of one batch: per sample b, or per sample and channel (b * C + c)."""

    def __init__(self, batch, channels):
        b, bc = batch, batch * channels
        self.batch, self.channels = batch, channels
        self.applied = [[False] * b for _ in TABLE]
        self.angles = [[0.0, 0.0, 0.0] for _ in range(b)]
        self.scale = [1.0] * b
        self.noise_sigma = [0.0] * b
        self.noise_seed = 0
        self.blur_sigma = [[0.0, 0.0, 0.0] for _ in range(bc)]
        for name in _PER_CHANNEL.values():
            setattr(self, name, [1.0] * bc)
        self.mirror = [[False, False, False] for _ in range(b)]

    def as_dict(self):
        return {k: v for k, v in vars(self).items()}


def draw(geometry, probability, batch, channels, seed, epoch, step, stream=0):
    """The Plan of batch (epoch, step): one SplitMix64 stream per transform (stream + t + 1,
    as the C++ twin with stream 0)."""
    plan = Plan(batch, channels)
    rank = len(geometry.patch)
    for t, info in enumerate(TABLE):
        rng = Rng(seed, epoch, step, stream + t + 1)
        for s in range(batch):
            if t == MIRROR:
                for a in range(rank):
                    plan.mirror[s][a] = rng.bernoulli(probability[t])
                plan.applied[t][s] = any(plan.mirror[s])
                continue
            if not rng.bernoulli(probability[t]):
                continue
            plan.applied[t][s] = True
            if t == ROTATE:
                axes = 3 if rank == 3 and not geometry.in_plane else 1
                for a in range(axes):
                    plan.angles[s][a] = rng.uniform(-geometry.max_angle, geometry.max_angle)
            elif t == SCALE:
                plan.scale[s] = _draw_value(rng, info)
            elif t == NOISE:
                plan.noise_sigma[s] = _draw_value(rng, info)
            else:
                for c in range(s * channels, (s + 1) * channels):
                    if not rng.bernoulli(info.channel_probability):
                        continue
                    if t == BLUR:
                        for a in range(rank):
                            plan.blur_sigma[c][a] = _draw_value(rng, info)
                    else:
                        getattr(plan, _PER_CHANNEL[t])[c] = _draw_value(rng, info)
        if t == NOISE:
            plan.noise_seed = rng.next()
    return plan
