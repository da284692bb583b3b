"""T.NnUnet's mask handling against a reference of nnU-Net v2.8.1's: the segmentation part of
batchgeneratorsv2's SpatialTransform, MaskImageTransform and RemoveLabelTansform, as
nnUNetTrainer.get_training_transforms configures them, written here in torch from their
code, with the rotation and scale forced. Also: the channels masked from a dataset's
provenance, and the noise drawn per channel."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import shardify
import shardify.transforms as T
from shardify import _nnunet, _nnunet_apply

# The releases the reference follows.
NNUNET = "MIC-DKFZ/nnUNet@468cf803df9b267150ae2b6c0c59b8ac84f16227"  # v2.8.1
BGV2 = "MIC-DKFZ/batchgeneratorsv2@136ec30e32502ca2f6eeacfc2ff51f361b3146b1"  # 0.3.2, nnU-Net 2.8.1's minimum


# ---------------------------------------------------------------- reference: batchgeneratorsv2 0.3.2

def affine_3d(angles, scales):
    """batchgeneratorsv2/transforms/spatial/spatial.py: create_affine_matrix_3d (BGV2):
    rotations about the array axes 0, 1, 2 composed as Rz @ Ry @ Rx, then the scaling."""
    a, b, c = angles
    rx = np.array([[1, 0, 0], [0, math.cos(a), -math.sin(a)], [0, math.sin(a), math.cos(a)]])
    ry = np.array([[math.cos(b), 0, math.sin(b)], [0, 1, 0], [-math.sin(b), 0, math.cos(b)]])
    rz = np.array([[math.cos(c), -math.sin(c), 0], [math.sin(c), math.cos(c), 0], [0, 0, 1]])
    return rz @ ry @ rx @ np.diag(scales)


def centred_grid(size):
    """spatial.py: _create_centered_identity_grid2 (BGV2): voxel offsets from the patch
    centre, [*size, rank]."""
    axes = [torch.linspace((1 - s) / 2, (s - 1) / 2, s) for s in size]
    return torch.stack(torch.meshgrid(axes, indexing="ij"), -1)


def to_grid_sample(grid, shape):
    """spatial.py: _convert_my_grid_to_grid_sample_grid (BGV2): offsets over half the input
    size, the axes reversed (grid_sample's x, y, z)."""
    for d, s in enumerate(shape):
        grid[..., d] /= s / 2
    return torch.flip(grid, (grid.dim() - 1,))


def spatial_grid(patch, shape, angles, scale):
    """spatial.py: SpatialTransform.get_parameters (BGV2) with rotation and scaling, no
    elastic deformation, random_crop False: the patch grid times the affine (row vectors:
    the input sampled at A^T p), centred on the input."""
    grid = torch.matmul(centred_grid(patch), torch.from_numpy(affine_3d(angles, [scale] * 3)).float())
    return to_grid_sample(grid, shape)


def out_of_bounds(grid, shape):
    """spatial.py: SpatialTransform._compute_out_of_bounds_mask (BGV2), align_corners False:
    beyond [-1 + 1/size, 1 - 1/size] on some axis. It pairs the size of array axis d with
    grid axis d, the reversed axes: on cubic inputs, as here, each axis' own size."""
    size = grid.new_tensor(shape)
    return ((grid < -1 + 1 / size) | (grid > 1 - 1 / size)).any(dim=-1)


def resample_seg(seg, grid, patch, mode_seg="bilinear"):
    """spatial.py: SpatialTransform._apply_to_segmentation (BGV2) with bg_style_seg_sampling
    False, border_mode_seg "constant", padding_value_seg -1: for "bilinear", each label of
    the map (sorted) as a one-hot map times 1000, sampled linearly, kept in float16; a label
    above 700 takes the voxel, the others the first largest; then -1 out of bounds."""
    def sample(x, mode):
        return F.grid_sample(x[None, None], grid[None], mode=mode, padding_mode="zeros", align_corners=False)[0, 0]

    if mode_seg == "nearest":
        out = sample(seg.float(), "nearest").to(seg.dtype)
    else:
        labels = torch.from_numpy(np.sort(np.unique(seg.numpy())))
        values = torch.zeros((len(labels), *patch), dtype=torch.float16)
        out = torch.zeros(patch, dtype=seg.dtype)
        done = torch.zeros(patch, dtype=torch.bool)
        for i, u in enumerate(labels):
            values[i] = sample((seg == u).float() * 1000, mode_seg)
            above = values[i] > 700
            out[above] = u
            done |= above
        out[~done] = labels[values[:, ~done].argmax(0)]
    return out.masked_fill(out_of_bounds(grid, seg.shape), -1)


def mask_image(image, seg, channels):
    """batchgeneratorsv2/transforms/utils/nnunet_masking.py: MaskImageTransform.apply (BGV2)
    with channel_idx_in_seg 0, set_outside_to 0: the channels set to 0 where seg < 0."""
    image = image.clone()
    for c in channels:
        image[c][seg < 0] = 0
    return image


def remove_label(seg, value=-1, set_to=0):
    """batchgeneratorsv2/transforms/utils/remove_label.py: RemoveLabelTransform
    ._apply_to_segmentation (BGV2), as nnU-Net's RemoveLabelTansform(-1, 0)."""
    seg = seg.clone()
    seg[seg == value] = set_to
    return seg


def nnunet_tail(image, seg, channels):
    """nnunetv2/training/nnUNetTrainer/nnUNetTrainer.py: get_training_transforms (NNUNET):
    after mirroring, MaskImageTransform for the use_mask_for_norm channels, then
    RemoveLabelTansform(-1, 0)."""
    return mask_image(image, seg, channels), remove_label(seg)


# ---------------------------------------------------------------- shardify, its parameters forced

def forced(image, mask, patch, angles, scale, **options):
    """T.NnUnet's ops (_nnunet_apply.apply, the twin of shardtrain's) on one sample with
    this rotation and scale: batchgeneratorsv2 samples at A^T p = S Rx(-a) Ry(-b) Rz(-c) p,
    which is shardify's matrix with angles (-a, b, -c)."""
    probability = _nnunet.probabilities({"all": 0, "rotate": 1, "scale": 1})
    g = _nnunet.Geometry(patch, probability, margin=True)
    g.margin = [(s - p) // 2 for s, p in zip(image.shape[1:], patch)]
    plan = _nnunet.Plan(1, image.shape[0])
    plan.applied[_nnunet.ROTATE][0] = plan.applied[_nnunet.SCALE][0] = True
    plan.angles[0] = [-angles[0], angles[1], -angles[2]]
    plan.scale[0] = scale
    x, m = _nnunet_apply.apply(image[None], mask[None, None], plan, g, **options)
    return x[0], m[0, 0]


def label_volume(shape, seed):
    """Blocks of labels 0..3 with noise at their edges (ties and near-ties), -1 in a slab
    (unlabelled: outside a nonzero region)."""
    g = torch.Generator().manual_seed(seed)
    seg = torch.zeros(shape, dtype=torch.int16)
    seg[4:14, 3:12, 5:17] = 1
    seg[8:18, 9:19, 2:10] = 2
    seg[2:7, 12:17, 11:16] = 3
    noise = torch.randint(0, 4, shape, generator=g, dtype=torch.int16)
    seg = torch.where(torch.rand(shape, generator=g) < 0.15, noise, seg)
    seg[:, :, :3] = torch.where(seg[:, :, :3] == 0, torch.tensor(-1, dtype=torch.int16), seg[:, :, :3])
    return seg


CASES = [((20, 20, 20), (12, 12, 12), (20.0, -12.0, 27.0), 1.0),
         ((20, 20, 20), (12, 12, 12), (-28.0, 5.0, 14.0), 1.35),  # beyond the input
         ((20, 20, 20), (14, 14, 14), (0.0, 0.0, 45.0), 0.75)]


@pytest.mark.parametrize("shape, patch, degrees, scale", CASES)
def test_masks_resample_pad_mask_and_remove_as_nnunet(shape, patch, degrees, scale):
    angles = [math.radians(d) for d in degrees]
    seg = label_volume(shape, seed=0)
    image = torch.rand((2,) + shape, generator=torch.Generator().manual_seed(1)) + 1
    grid = spatial_grid(patch, shape, angles, scale)
    for mode_seg, mode in (("bilinear", "linear"), ("nearest", "nearest")):
        want_seg = resample_seg(seg, grid, patch, mode_seg)
        _, raw = forced(image, seg, patch, angles, scale, mask_mode=mode, ignore_label=-1)
        assert torch.equal(raw, want_seg), (mode, int((raw != want_seg).sum()))
        want_image = F.grid_sample(image[None], grid[None], mode="bilinear", padding_mode="zeros",
                                   align_corners=False)[0]
        want_image, want_out = nnunet_tail(want_image, want_seg, [1])
        x, out = forced(image, seg, patch, angles, scale, mask_mode=mode, mask_image_channels=[1])
        assert torch.equal(out, want_out) and out.dtype == seg.dtype
        torch.testing.assert_close(x, want_image, rtol=0, atol=1e-4)
        assert torch.equal(x[1] == 0, want_seg < 0)  # masked exactly where the segmentation is outside
    assert out_of_bounds(grid, shape).any() == (scale > 1.1)  # zoomed out: beyond the input


def test_a_uint8_mask_pads_with_255_which_ranks_and_ends_as_nnunets_minus_one():
    shape, patch, angles, scale = (20, 20, 20), (12, 12, 12), [0.3, -0.2, 0.4], 1.3
    seg = label_volume(shape, seed=3)
    image = torch.ones((1,) + shape)
    _, signed = forced(image, seg, patch, angles, scale, ignore_label=-1)
    _, unsigned = forced(image, seg.to(torch.uint8), patch, angles, scale, label_pad=255, ignore_label=255)
    assert unsigned.dtype == torch.uint8 and torch.equal(unsigned.long(), signed.long().masked_fill(signed < 0, 255))
    _, removed = forced(image, seg.to(torch.uint8), patch, angles, scale, label_pad=255)
    assert torch.equal(removed.long(), signed.long().clamp_min(0))


class _Provenance:
    """A dataset as NnUnet.bind reads it: its provenance options."""

    def __init__(self, **options):
        self.provenance = {"options": options}


def test_the_channels_masked_come_from_the_dataset_unless_given(tmp_path):
    assert _nnunet.mask_image_channels("nonzero", "zscore", 3) == [0, 1, 2]
    assert _nnunet.mask_image_channels("nonzero", "zscore,ct", 2) == [0]  # every zscore channel
    assert _nnunet.mask_image_channels("nonzero,-,all", "zscore,ct,zscore", 3) == [0]
    assert _nnunet.mask_image_channels("", "zscore", 3) == []
    aug = T.preset("nnunet", spatial_dims=2)
    assert aug.masked_channels(2) == []
    assert aug.bind((16, 16), dataset=_Provenance(zscore_region="nonzero", normalize="ct,zscore")).masked_channels(2) \
        == [1]
    explicit = T.NnUnet(spatial_dims=2, mask_image_channels=[0])
    assert explicit.bind(None, dataset=_Provenance(zscore_region="nonzero")).masked_channels(2) == [0]
    # A Loader hands its Dataset to a bind that takes one.
    with shardify.Writer(tmp_path / "ds", threads=1) as w:
        for i in range(4):
            w.write({"image": np.full((1, 8, 8), i, np.float32), "mask": np.zeros((1, 8, 8), np.int8)})
    seen = []

    class Capture:
        def __call__(self, batch):
            return batch

        def bind(self, patch, dataset=None):
            seen.append(dataset)
            return self

    shardify.Loader(tmp_path / "ds", batch_size=2, transform=Capture(), threads=1)
    assert isinstance(seen[0], shardify.Dataset)
    bound = shardify.Loader(tmp_path / "ds", batch_size=2, transform=T.Compose([aug]), threads=1).transform
    assert bound.transforms[0].masked_channels(1) == []  # no zscore_region recorded


def test_noise_is_a_field_per_channel_with_one_std():
    """batchgeneratorsv2 0.3.2's GaussianNoiseTransform, synchronize_channels True
    (batchgeneratorsv2/transforms/intensity/gaussian_noise.py, BGV2): one std for the
    sample, a field for each channel (its releases before 0.3.1 added one field to all)."""
    aug = T.NnUnet(spatial_dims=3, p={"all": 0, "noise": 1})
    out = aug({"image": torch.zeros(2, 2, 16, 16, 16)}, seed=0, epoch=0, step=0)["image"]
    for b in range(2):
        a, c = out[b].flatten(1)
        assert a.std() > 0 and abs(float(torch.corrcoef(torch.stack([a, c]))[0, 1])) < 0.05
        assert float(a.std() / c.std()) == pytest.approx(1, abs=0.1)
