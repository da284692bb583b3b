"""Loader(augment=...): nnU-Net's augmentation in the Loader's C++ threads gives the batches
that the same T.NnUnet gives as the Loader's transform, for any thread count and on resume."""
import numpy as np
import pytest
import torch

import shardify
import shardify.transforms as T

PATCH = (16, 16, 16)


def batches(path, count, **kw):
    loader = shardify.Loader(path, batch_size=4, patch=PATCH, seed=5, foreground_fraction=0.5, **kw)
    out = []
    while len(out) < count:
        for batch in loader:
            out.append({k: v.clone() for k, v in batch.items()})
            if len(out) == count:
                break
    loader.close()
    return out


@pytest.mark.parametrize("options", [{}, {"p": {"all": 1.0}}, {"p": {"all": 1.0}, "mask_mode": "nearest"},
                                     {"p": {"rotate": 1.0, "mirror": 0.0}, "ignore_label": 9, "seed": 4}],
                         ids=["defaults", "all", "nearest", "ignore"])
def test_augment_gives_the_batches_of_the_same_transform(volumes, options):
    path, _ = volumes
    augment = T.NnUnet(spatial_dims=3, **options)
    threaded = batches(path, 6, augment=augment, threads=2)
    python = batches(path, 6, transform=augment, transform_ahead=0)
    voxels = agree = 0
    for c, p in zip(threaded, python):
        assert c["image"].dtype == torch.float32 and c["image"].shape == p["image"].shape
        assert c["image"].shape[1:] == (1,) + PATCH
        assert c["mask"].dtype == p["mask"].dtype == torch.uint8 and c["mask"].shape == p["mask"].shape
        assert torch.equal(c["index"], p["index"])
        scale = 1 + float(p["image"].abs().max())
        assert float((c["image"] - p["image"]).abs().max()) <= 1e-4 * scale
        voxels += p["mask"].numel()
        agree += int((c["mask"] == p["mask"]).sum())
    # Linear label resampling rounds votes to float16: a vote at a rounding edge may go
    # either way between two float orders.
    assert agree / voxels >= (1.0 if options.get("mask_mode") == "nearest" else 0.999)
    if "ignore_label" in options:
        assert any(bool((b["mask"] == 9).any()) for b in threaded)


def test_augment_is_the_same_for_any_thread_count_and_on_resume(volumes):
    path, _ = volumes
    one = batches(path, 5, augment="nnunet", threads=1)
    two = batches(path, 5, augment="nnunet", threads=2)
    for a, b in zip(one, two):
        assert torch.equal(a["image"], b["image"]) and torch.equal(a["mask"], b["mask"])
    loader = shardify.Loader(path, batch_size=4, patch=PATCH, seed=5, foreground_fraction=0.5, augment="nnunet")
    it = iter(loader)
    next(it), next(it)
    state = loader.state_dict()
    loader.close()
    resumed = shardify.Loader(path, batch_size=4, patch=PATCH, seed=5, foreground_fraction=0.5, augment="nnunet")
    resumed.load_state_dict(state)
    for k, batch in zip(range(2, 5), resumed):
        assert torch.equal(batch["image"], one[k]["image"]) and torch.equal(batch["mask"], one[k]["mask"])
    resumed.close()


def test_augment_refuses_what_it_cannot_do(volumes, fmnist):
    path, _ = volumes
    with pytest.raises(ValueError, match="augment= needs patch="):
        shardify.Loader(path, augment="nnunet")
    with pytest.raises(ValueError, match="augment must be None, 'nnunet' or a T.NnUnet"):
        shardify.Loader(path, patch=PATCH, augment="mednist")
    with pytest.raises(TypeError, match="other transforms go to transform="):
        shardify.Loader(path, patch=PATCH, augment=T.preset("mednist"))
    with pytest.raises(ValueError, match="spatial_dims=2"):
        shardify.Loader(path, patch=PATCH, augment=T.NnUnet(spatial_dims=2))
    with pytest.raises(ValueError, match="label_pad 0 differs"):
        shardify.Loader(path, patch=PATCH, augment=T.NnUnet(label_pad=0))
    with pytest.raises(ValueError, match="keys"):
        shardify.Loader(path, patch=PATCH, augment=T.NnUnet(keys="img"))
    with pytest.raises(ValueError, match="margin"):
        shardify.Loader(path, patch=PATCH, augment="nnunet", transform=T.preset("nnunet"))
    with pytest.raises(ValueError, match="ignore label 300 does not fit field 'mask' of dtype u8"):
        shardify.Loader(path, patch=PATCH, augment=T.NnUnet(ignore_label=300))
    with pytest.raises(ValueError, match="masks image channel 3 of images of 1 channel"):
        shardify.Loader(path, patch=PATCH, augment=T.NnUnet(mask_image_channels=[3]))
    with pytest.raises(ValueError, match="rotate=2"):
        shardify.Loader(path, patch=PATCH, augment=T.NnUnet(p={"rotate": 2}))
    assert np.isfinite(next(iter(shardify.Loader(path, patch=PATCH, batch_size=2, augment="nnunet",
                                                 output="numpy")))["image"]).all()
