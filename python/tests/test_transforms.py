"""shardify.transforms: batched, seeded augmentation; its nnU-Net preset held to the C++
ones (tests/trainer/augment_reference.cpp: the trainer's device path and the Loader's host
path) parameter for parameter and voxel for voxel."""

import json
import os
import subprocess

import numpy as np
import pytest
import torch

import shardify
import shardify.transforms as T
from shardify import _nnunet

REFERENCE = os.environ.get("SHARDIFY_AUGMENT_REFERENCE")
needs_reference = pytest.mark.skipif(not REFERENCE, reason="built without LibTorch: no C++ augmentation to compare")


def phantom(batch, channels, spatial, seed=0, unlabelled=False):
    """Smooth images with structure (so blur, gamma and resampling all change them) and a
    mask of two labels that follows the image (unlabelled: -1 far from the centre, as a
    converter marks voxels outside the nonzero region)."""
    g = torch.Generator().manual_seed(seed)
    axes = torch.meshgrid(*[torch.linspace(-1, 1, n) for n in spatial], indexing="ij")
    r = sum((a - 0.2 * (k + 1)) ** 2 for k, a in enumerate(axes)).sqrt()  # off centre: flips show
    base = torch.stack([torch.cos(3 * r + k) * 40 + 50 for k in range(channels)])
    image = base.unsqueeze(0) + torch.rand((batch, channels) + tuple(spatial), generator=g) * 10
    mask = (r < 0.5).long() + (r < 0.25).long() - (unlabelled & (r > 1.2)).long()
    return image.float(), mask.unsqueeze(0).repeat(batch, *([1] * len(spatial)))


def reference(tmp_path, patch, image, mask, seed, epoch, step, margin, p="", options=None):
    """augment_reference's output; options: T.NnUnet's mask options."""
    extra = [f"{k}={':'.join(map(str, v)) if isinstance(v, (list, tuple)) else v}" for k, v in (options or {}).items()]
    image.numpy().astype(np.float32).tofile(tmp_path / "image.f32")
    mask_path = "-"
    if mask is not None:
        mask.numpy().astype(np.int64).tofile(tmp_path / "mask.i64")
        mask_path = str(tmp_path / "mask.i64")
    out = tmp_path / "out"
    subprocess.run([REFERENCE, "apply", ",".join(map(str, patch)), ",".join(map(str, image.shape)), str(seed),
                    str(epoch), str(step), "1" if margin else "0", p, str(tmp_path / "image.f32"), mask_path,
                    str(out)] + extra, check=True, timeout=120)
    plan = json.loads((tmp_path / "out.plan.json").read_text())
    shape = list(image.shape[:2]) + [s - 2 * m for s, m in zip(image.shape[2:], plan["margin"])]
    x = torch.from_numpy(np.fromfile(tmp_path / "out.image", dtype=np.float32).reshape(shape))
    m = None
    if mask is not None:
        m = torch.from_numpy(np.fromfile(tmp_path / "out.mask", dtype=np.int64).reshape([shape[0]] + shape[2:]))
    return plan, x, m


@needs_reference
def test_the_table_is_the_cpp_table():
    rows = json.loads(subprocess.run([REFERENCE, "table"], check=True, capture_output=True, text=True,
                                     timeout=60).stdout)
    assert [r["name"] for r in rows] == [t.name for t in T.NNUNET_TABLE]
    for r, t in zip(rows, T.NNUNET_TABLE):
        assert (r["probability"], r["channel_probability"], r["lo"], r["hi"], r["split_at_one"], r["parameter"]) == (
            t.probability, t.channel_probability, t.lo, t.hi, t.split_at_one, t.parameter), t.name


def python_plan(aug, patch, image, seed, epoch, step, margin):
    geometry = _nnunet.Geometry(patch, aug._probability, margin=margin)
    return geometry, _nnunet.draw(geometry, aug._probability, image.shape[0], image.shape[1], seed, epoch, step)


@needs_reference
@pytest.mark.parametrize("patch, p, margin, options", [
    ((12, 12, 12), "all=1", True, {}),  # every transform on every sample, patch read with a margin
    ((10, 10, 10), "", False, {"mask_mode": "nearest"}),  # nnU-Net's probabilities, whole inputs
    ((24, 20), "all=1", False, {"ignore_label": -1, "mask_image_channels": [1]}),  # 2D
    ((4, 16, 16), "all=1,mirror=0.5", True, {"mask_image_channels": [0, 1]}),  # anisotropic: in-plane
])
def test_python_and_cpp_draw_and_apply_the_same(tmp_path, patch, p, margin, options):
    spec = dict(item.split("=") for item in p.split(",")) if p else {}
    aug = T.NnUnet(spatial_dims=len(patch), p={k: float(v) for k, v in spec.items()}, **options)
    geometry = _nnunet.Geometry(patch, aug._probability, margin=margin)
    spatial = [s + 2 * m for s, m in zip(patch, geometry.margin)]
    image, mask = phantom(5, 2, spatial, unlabelled=True)
    for seed, epoch, step in ((7, 0, 0), (7, 3, 11), (123456789, 1, 2)):
        plan, x_cpp, m_cpp = reference(tmp_path, patch, image, mask, seed, epoch, step, margin, p, options)
        _, mine = python_plan(aug, patch, image, seed, epoch, step, margin)
        assert plan["margin"] == geometry.margin
        for key, value in mine.as_dict().items():
            assert plan[key] == (value if key != "mirror" else [[bool(v) for v in row] for row in value]), key
        bound = aug.bind(patch) if margin else aug
        out = bound({"image": image, "mask": mask.unsqueeze(1)}, seed=seed, epoch=epoch, step=step)
        # The host path (ApplySample, sample by sample, as the Loader's threads run it) too.
        host_plan, x_host, m_host = reference(tmp_path, patch, image, mask, seed, epoch, step, margin, p,
                                              dict(options, path="host"))
        assert host_plan == plan
        for x, m in ((x_cpp, m_cpp), (x_host, m_host)):
            assert out["image"].shape == x.shape
            torch.testing.assert_close(out["image"], x, rtol=1e-4, atol=1e-3)
            assert torch.equal(out["mask"].squeeze(1), m)


def test_a_position_gives_one_batch_and_samples_differ():
    aug = T.preset("nnunet", spatial_dims=2)
    image, mask = phantom(8, 1, (32, 32))
    image = image[:1].repeat(8, 1, 1, 1)  # eight identical samples
    kept = image.clone(), mask.clone()
    a = aug({"image": image, "mask": mask}, seed=3, epoch=2, step=5)
    assert torch.equal(image, kept[0]) and torch.equal(mask, kept[1])  # the input is left alone
    b = aug({"image": image, "mask": mask}, seed=3, epoch=2, step=5)
    c = aug({"image": image, "mask": mask}, seed=3, epoch=2, step=6)
    assert torch.equal(a["image"], b["image"]) and torch.equal(a["mask"], b["mask"])
    assert not torch.equal(a["image"], c["image"])
    distinct = {a["image"][i].numpy().tobytes() for i in range(8)}
    assert len(distinct) >= 6  # per-sample parameters, not one draw per batch


def test_calls_without_a_position_count_steps():
    aug = T.RandFlip(axes=(0, 1), p=0.5)
    image = torch.arange(2 * 16, dtype=torch.float32).view(2, 1, 4, 4).repeat(8, 1, 1, 1)
    first, second = aug({"image": image}), aug({"image": image})
    assert torch.equal(first["image"], aug({"image": image}, epoch=0, step=0)["image"])
    assert torch.equal(second["image"], aug({"image": image}, epoch=0, step=1)["image"])


def test_masks_move_with_their_images():
    _, mask = phantom(6, 1, (40, 40))
    image = mask.unsqueeze(1).float() * 100  # the image is the mask: both must move alike
    for aug in (T.RandFlip(axes=(0, 1), p=0.5), T.RandAffine(rotate=30, scale=(0.8, 1.25), p=1.0),
                T.NnUnet(spatial_dims=2, p={"all": 0, "rotate": 1, "scale": 1, "mirror": 0.5}, label_pad=0)):
        out = aug({"image": image, "mask": mask}, seed=1, epoch=0, step=0)
        assert out["mask"].shape == mask.shape and out["mask"].dtype == mask.dtype
        assert not torch.equal(out["mask"], mask)
        agree = ((out["image"].squeeze(1) - out["mask"] * 100).abs() < 50).float().mean()
        assert agree > 0.98, (aug, float(agree))  # only edges may differ (linear against nearest)


def test_multi_label_masks_move_per_channel():
    _, mask = phantom(4, 1, (32, 32))
    multi = torch.stack([mask >= 1, mask >= 2, mask == 0], 1).to(torch.uint8)  # overlapping 0/1 channels
    image = multi[:, :1].float()
    out = T.RandAffine(rotate=40, p=1.0)({"image": image, "mask": multi}, seed=0, epoch=0, step=0)
    m = out["mask"]
    assert m.shape == multi.shape and set(m.unique().tolist()) <= {0, 1}
    assert torch.equal((m[:, 1] == 1) & (m[:, 0] == 0), torch.zeros_like(m[:, 1], dtype=torch.bool))  # 2 within 1


def test_label_pad_is_taken_in_the_mask_dtype_and_ends_as_background_or_the_ignore_label():
    _, mask = phantom(2, 1, (16, 16))
    m = mask.to(torch.uint8).unsqueeze(1)
    m[:, :, :3] = 255  # the Loader's padding: -1 as uint8
    for ignore, outside in ((None, 0), (-1, 255)):
        aug = T.NnUnet(spatial_dims=2, p={"all": 0, "scale": 1}, ignore_label=ignore)
        out = aug({"image": torch.ones(2, 1, 16, 16), "mask": m}, seed=0, epoch=0, step=0)["mask"]
        assert out.dtype == torch.uint8
        assert set(out.unique().tolist()) <= {0, 1, 2, outside}
        assert (out[:, :, 0] == outside).all()  # the top rows stay outside at any zoom


def test_presets_and_their_parameters():
    assert set(T.PRESETS) >= {"nnunet", "mednist", "none"}
    med = T.preset("mednist")
    kinds = [type(t).__name__ for t in med.transforms]
    assert kinds == ["ScaleIntensity", "RandRotate", "RandFlip", "RandZoom"]
    assert med.transforms[1].rotate == 15.0 and med.transforms[1].p == 0.5
    assert med.transforms[2].axes == (1,) and med.transforms[3].scale == (0.9, 1.1)
    image = (torch.rand(16, 1, 64, 64) * 255).to(torch.uint8)
    out = med({"image": image, "label": torch.arange(16)})
    assert out["image"].dtype == torch.float32 and out["image"].shape == (16, 1, 64, 64)
    assert torch.equal(out["label"], torch.arange(16))
    assert 0.0 <= float(out["image"].min()) and float(out["image"].max()) <= 1.0 + 1e-6
    assert T.preset("nnunet").spatial_dims == 3
    with pytest.raises(ValueError, match="unknown preset 'nope'"):
        T.preset("nope")


def test_mednist_preset_mirrors_left_right_and_turns_volumes_about_x_as_monai_does():
    """MONAI reads a picture [W, H] (PILReader, ITKReader), so the tutorial's RandFlip(spatial_axis=0)
    mirrors it left-right; its RandRotate(range_x) turns a volume [x, y, z] about x."""
    picture = torch.arange(10 * 20, dtype=torch.float32).view(1, 1, 10, 20)  # a 10 x 20 PNG, as stored
    med = T.preset("mednist")
    rotate, flip, zoom = med.transforms[1:]
    rotate.p, flip.p, zoom.p = 0.0, 1.0, 0.0
    scaled = T.ScaleIntensity()({"image": picture})["image"]
    assert torch.allclose(med({"image": picture})["image"], scaled.flip(-1), atol=1e-6)  # resampled: one grid
    volume = torch.arange(6, dtype=torch.float32).view(1, 1, 1, 1, 6).expand(2, 1, 8, 8, 6)  # varies along x
    med3 = T.preset("mednist", spatial_dims=3)
    med3.transforms[1].p, med3.transforms[2].p, med3.transforms[3].p = 1.0, 0.0, 0.0
    turned = med3({"image": volume})["image"]
    assert torch.allclose(turned, T.ScaleIntensity()({"image": volume})["image"], atol=1e-5)


def test_bound_nnunet_reads_a_margin_and_crops_it():
    aug = T.preset("nnunet", spatial_dims=3)
    bound = aug.bind((16, 16, 16))
    assert bound.margin == (5, 5, 5) and aug.margin is None
    x = torch.rand(2, 1, 26, 26, 26)
    assert bound({"image": x})["image"].shape == (2, 1, 16, 16, 16)
    with pytest.raises(ValueError, match=r"needs inputs of spatial size \(26, 26, 26\)"):
        bound({"image": torch.rand(2, 1, 16, 16, 16)})
    with pytest.raises(ValueError, match="cannot augment patches of 2 axes"):
        aug.bind((16, 16))


def test_bad_input_names_what_is_wrong():
    with pytest.raises(TypeError, match="takes a dict"):
        T.RandFlip()(torch.zeros(1, 1, 4, 4))
    with pytest.raises(ValueError, match=r"needs batch\['image'\] as \[B, C, 3 spatial axes\]"):
        T.NnUnet(spatial_dims=3)({"image": torch.zeros(1, 1, 4, 4)})
    with pytest.raises(ValueError, match="does not match the image"):
        T.RandFlip()({"image": torch.zeros(2, 1, 4, 4), "mask": torch.zeros(2, 1, 4, 5)})
    with pytest.raises(ValueError, match="unknown augmentation transform 'twist'"):
        T.NnUnet(p={"twist": 0.5})
    with pytest.raises(ValueError, match="bicubic"):
        T.RandAffine(rotate=5, mode="bicubic")({"image": torch.zeros(1, 1, 4, 4, 4)})
    with pytest.raises(ValueError, match="give both epoch= and step="):
        T.RandFlip()({"image": torch.zeros(1, 1, 4, 4)}, epoch=1)


def monai_normalize(img, subtrahend=None, divisor=None, nonzero=False, channel_wise=False):
    """One sample [C, ...] by monai/transforms/intensity/array.py: NormalizeIntensity._normalize
    and __call__ (Project-MONAI/MONAI@d388d1c6fec8cb3a0eebee5b5a0b9776ca59ca83), in numpy."""
    def normalize(v, sub, div):
        v = v.astype(np.float32)
        keep = v != 0 if nonzero else np.ones(v.shape, bool)
        if not keep.any():
            return v
        sub = v[keep].mean() if sub is None else sub
        div = v[keep].std() if div is None else div  # the population std
        v[keep] = (v[keep] - sub) / (1.0 if div == 0 else div)
        return v

    if not channel_wise:
        return normalize(img, subtrahend, divisor)
    return np.stack([normalize(c, None if subtrahend is None else subtrahend[i],
                               None if divisor is None else divisor[i]) for i, c in enumerate(img)])


@pytest.mark.parametrize("options", [{}, {"channel_wise": True}, {"nonzero": True},
                                     {"nonzero": True, "channel_wise": True, "mean": [1.0, 60.0], "std": [0.0, 2.0]}])
def test_normalize_intensity_follows_monai(options):
    x = torch.tensor([[0, 1, 2, 4], [50, 0, 55, 52]], dtype=torch.float64).view(1, 2, 2, 2)  # channel means apart
    x = torch.cat([x, torch.full_like(x, 7.0), torch.zeros_like(x)])  # a constant sample, an empty one
    kw = {"subtrahend": options.get("mean"), "divisor": options.get("std"), "nonzero": options.get("nonzero", False),
          "channel_wise": options.get("channel_wise", False)}
    out = T.NormalizeIntensity(**options)({"image": x})["image"]
    for b in range(x.shape[0]):
        np.testing.assert_allclose(out[b].numpy(), monai_normalize(x[b].numpy(), **kw), rtol=1e-6, atol=1e-6)
    assert out.dtype == torch.float32
    assert T.NormalizeIntensity(dtype=None)({"image": x})["image"].dtype == torch.float64
    with pytest.raises(ValueError, match="batch\\['image'\\] has 2 channels, but mean has 3 values"):
        T.NormalizeIntensity(mean=[0, 1, 2])({"image": x})


def test_scale_intensity():
    x = torch.arange(2 * 2 * 9, dtype=torch.float32).view(2, 2, 3, 3)
    s = T.ScaleIntensity(minv=-1, maxv=1)({"image": x})["image"]
    assert torch.allclose(s.flatten(1).min(1)[0], -torch.ones(2)) and torch.allclose(s.flatten(1).max(1)[0],
                                                                                   torch.ones(2))


def test_save_grid_draws_images_with_their_masks(tmp_path):
    from PIL import Image
    image = torch.zeros(3, 1, 10, 12)
    image[:, :, :, 6:] = 1.0  # left half black, right half white
    mask = torch.zeros(3, 10, 12, dtype=torch.long)
    mask[:, 2:5, 1:4] = 1
    label = torch.tensor([7, 8, 9])
    path = T.save_grid({"image": image, "mask": mask, "label": label}, tmp_path / "grid.png", columns=2)
    pixels = np.asarray(Image.open(path))
    # Enlarged 8 times (12 px to at least 96), each tile with a 12-pixel caption line below.
    h, w = 80, 96
    assert pixels.shape == (2 * (h + 12 + 2), 2 * (w + 2), 3)
    tile = pixels[1:1 + h, 1:1 + w]  # the first sample, inside its 1-pixel frame
    assert (tile[0, 0] == 0).all() and (tile[0, w - 1] == 255).all()
    assert (tile[:, 47] == 0).all() and (tile[:, 48] == 255).all()  # sharp: whole pixels, no blur
    red = tile[2 * 8 + 4, 1 * 8 + 4]
    assert red[0] > red[1] + 50  # label 1 drawn in colour over black
    caption = pixels[1 + h:1 + h + 12, 1:1 + w]
    assert (caption == 235).all(axis=2).sum() > 20  # "label 7" written below the tile
    assert (pixels[h + 14:, w + 3:] == 0).all()  # no fourth sample


def test_save_grid_captions_name_each_samples_values():
    from shardify._presets import _captions
    batch = {"image": torch.zeros(2, 1, 4, 4), "label": torch.tensor([[3], [4]]), "case": torch.tensor([0.5, 2.0]),
             "mask": torch.zeros(2, 1, 4, 4), "names": ["a", "b"]}
    assert _captions(batch, 2, ("image", "mask")) == ["label 3, case 0.5", "label 4, case 2"]
    assert _captions({"image": torch.zeros(2, 1, 4, 4)}, 2, ("image", "mask")) == ["#0", "#1"]


def test_loader_transform_is_deterministic_on_resume(fmnist):
    aug = T.preset("mednist")
    kwargs = dict(batch_size=32, seed=4, transform=aug, threads=2)
    whole = [b["image"].clone() for b in shardify.Loader(fmnist, **kwargs)]
    first = shardify.Loader(fmnist, **kwargs)
    it = iter(first)
    for _ in range(3):
        next(it)
    state = first.state_dict()
    del it
    resumed = shardify.Loader(fmnist, **kwargs)
    resumed.load_state_dict(state)
    rest = [b["image"] for b in resumed]
    assert len(rest) == len(whole) - 3
    for a, b in zip(rest, whole[3:]):
        assert torch.equal(a, b)
    assert whole[0].dtype == torch.float32 and float(whole[0].max()) <= 1.0 + 1e-6


def test_compose_resamples_consecutive_spatial_transforms_once():
    _, mask = phantom(16, 1, (48, 40))
    image = mask.unsqueeze(1).float() * 100
    steps = [T.RandRotate(20, p=0.7), T.RandFlip(axes=(0, 1), p=0.5), T.RandZoom(0.8, 1.2, p=0.7)]
    fused = T.Compose(steps)({"image": image, "mask": mask}, seed=5, epoch=1, step=2)
    apart = T.Compose(steps, fuse=False)({"image": image, "mask": mask}, seed=5, epoch=1, step=2)
    # The same draws: the masks agree but at the edges of labels (one nearest-neighbour
    # resampling against two), and images agree as well as two bilinear passes allow.
    assert (fused["mask"] == apart["mask"]).float().mean() > 0.97
    assert ((fused["image"] - apart["image"]).abs() < 50).float().mean() > 0.97
    flips = T.Compose([T.RandFlip(axes=(0,), p=0.5), T.RandFlip(axes=(1,), p=0.5)])
    a = flips({"image": image, "mask": mask}, seed=0, epoch=0, step=0)
    b = T.Compose(flips.transforms, fuse=False)({"image": image, "mask": mask}, seed=0, epoch=0, step=0)
    assert torch.equal(a["mask"], b["mask"])  # flips compose exactly
    torch.testing.assert_close(a["image"], b["image"], atol=1e-3, rtol=0)


def test_affine_geometry_on_non_square_images():
    from shardify._draw import Rng
    h, w = 30, 64
    image = torch.zeros(1, 1, h, w)
    image[0, 0, 15, 52] = image[0, 0, 14, 52] = image[0, 0, 15, 51] = image[0, 0, 14, 51] = 1  # at offset (0, +19.5)
    aff = T.RandAffine(rotate=60, scale=(0.8, 1.2), p=1.0)
    for step in range(6):
        out = aff({"image": image}, seed=0, epoch=0, step=step)["image"][0, 0]
        (a, t), = aff._maps(Rng(0, 0, step, 1), 2, [h, w], 1)
        d = (0.0, 19.5)  # the dot's offset from the centre, in pixels
        det = a[0][0] * a[1][1] - a[0][1] * a[1][0]
        o = ((a[1][1] * d[0] - a[0][1] * d[1]) / det, (-a[1][0] * d[0] + a[0][0] * d[1]) / det)
        where = divmod(int(out.argmax()), w)
        expect = (o[0] + h / 2 - 0.5, o[1] + w / 2 - 0.5)
        if 0 <= expect[0] < h and 0 <= expect[1] < w:
            assert abs(where[0] - expect[0]) <= 1.5 and abs(where[1] - expect[1]) <= 1.5, (step, where, expect)
    assert torch.equal(T.RandAffine(rotate=0, p=1.0)({"image": image}, seed=0, epoch=0, step=0)["image"], image)


def test_affine_grid_is_torchs():
    from shardify._transforms_basic import _affine_grid
    g = torch.Generator().manual_seed(0)
    for size in ([7, 12], [5, 6, 9]):
        theta = torch.randn(3, len(size), len(size) + 1, generator=g)
        expect = torch.nn.functional.affine_grid(theta, [3, 1] + size, align_corners=False)
        torch.testing.assert_close(_affine_grid(theta, size), expect, atol=1e-5, rtol=1e-5)
