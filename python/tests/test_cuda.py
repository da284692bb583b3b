"""shardify on a CUDA device: Loader(device="cuda") yields device tensors holding the CPU
Loader's bytes, ordered with the caller's stream in both directions, and the transforms
give on the device what they give on the CPU. Skipped, visibly, where torch sees no device."""

import contextlib

import numpy as np
import pytest
import torch

import shardify
import shardify.transforms as T

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA device")


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """500 random 32x32 images (incompressible, so an overwritten buffer shows) in 4 classes."""
    out = tmp_path_factory.mktemp("cuda") / "ds"
    rng = np.random.default_rng(0)
    with shardify.Writer(out, fields={"image": ("u8", (1, 32, 32)), "label": "int"},
                         classes=["a", "b", "c", "d"], shard_size="64K") as w:
        for i in range(500):
            w.write({"image": rng.integers(0, 256, (1, 32, 32), dtype=np.uint8), "label": i % 4}, split="train")
    return str(out)


def test_cuda_batches_hold_the_cpu_batches_bytes(images):
    cpu = shardify.Loader(images, batch_size=64, seed=3)
    gpu = shardify.Loader(images, batch_size=64, seed=3, device="cuda")
    batches = 0
    for a, b in zip(cpu, gpu):
        for key in ("image", "label"):
            assert b[key].device == torch.device("cuda", torch.cuda.current_device())
            assert torch.equal(a[key], b[key].cpu()), key
        batches += 1
    assert batches == len(gpu) == 8


def test_work_on_another_stream_waits_for_the_copy_and_holds_the_buffer(images):
    # The stream is kept busy before each batch is read, and the batch is dropped at once:
    # only the events between the Loader's copy stream and this one keep the refill of a
    # slot from overwriting bytes the queued clone has not read yet.
    expected = [a["image"] for a in shardify.Loader(images, batch_size=64, seed=4)]
    stream = torch.cuda.Stream()
    clones = []
    with torch.cuda.stream(stream):
        for b in shardify.Loader(images, batch_size=64, seed=4, device="cuda", prefetch=1):
            torch.cuda._sleep(20_000_000)
            clones.append(b["image"].clone())
            del b
    stream.synchronize()
    assert len(clones) == len(expected)
    assert all(torch.equal(c.cpu(), e) for c, e in zip(clones, expected))


def test_a_transform_runs_on_the_device_and_matches_the_cpu(images):
    pipeline = T.preset("mednist")
    cpu = shardify.Loader(images, batch_size=64, seed=5, transform=pipeline)
    gpu = shardify.Loader(images, batch_size=64, seed=5, device="cuda", transform=pipeline)
    for a, b in zip(cpu, gpu):
        assert b["image"].is_cuda and b["image"].dtype == a["image"].dtype
        torch.testing.assert_close(b["image"].cpu(), a["image"], rtol=1e-4, atol=1e-3)


class PassThrough:
    """Hands the staged image on untouched (it still lives in the Loader's buffer) with a
    new tensor beside it, as a transform that only adds a field does."""

    def __call__(self, batch):
        return {"image": batch["image"], "scaled": batch["image"].float() * 2, "index": batch["index"]}


def test_a_transform_running_ahead_keeps_handed_on_buffers_until_the_loops_stream_is_done(images):
    # The helper transforms on its own stream; the loop's stream is kept busy before it
    # reads each batch, and drops it at once. The untouched image is released on the
    # loop's stream, so refilling its slot waits for the clone queued there.
    expected = [a["image"] for a in shardify.Loader(images, batch_size=64, seed=4)]
    stream = torch.cuda.Stream()
    clones = []
    with torch.cuda.stream(stream):
        loader = shardify.Loader(images, batch_size=64, seed=4, device="cuda", prefetch=1, transform=PassThrough())
        for b in loader:
            torch.cuda._sleep(20_000_000)
            clones.append((b["image"].clone(), b["scaled"].clone()))
            del b
    stream.synchronize()
    assert len(clones) == len(expected)
    for (image, scaled), e in zip(clones, expected):
        assert torch.equal(image.cpu(), e) and torch.equal(scaled.cpu(), e.float() * 2)


def test_a_transform_running_ahead_gives_what_it_gives_inside_next(images):
    options = dict(batch_size=64, seed=5, device="cuda", transform=T.preset("mednist"))
    inline = list(shardify.Loader(images, transform_ahead=0, **options))
    ahead = list(shardify.Loader(images, **options))
    assert len(inline) == len(ahead) == 8
    for a, b in zip(inline, ahead):
        assert torch.equal(a["index"], b["index"]) and torch.equal(a["image"], b["image"])


@contextlib.contextmanager
def no_synchronizing_ops():
    """torch raises on an operation that waits for the device (a copy to the host, .item(), ...)."""
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode("default")


@pytest.mark.parametrize("ahead", [0, 2])
def test_the_loader_and_its_transform_never_wait_for_the_device(images, ahead):
    loader = shardify.Loader(images, batch_size=64, seed=6, device="cuda", transform=T.preset("mednist"),
                             transform_ahead=ahead)
    with no_synchronizing_ops():
        assert sum(1 for _ in loader) == 8


@pytest.mark.parametrize("spatial", [(12, 12, 12), (24, 20)])
def test_nnunet_on_the_device_never_waits_for_it(spatial):
    image, mask = phantom(4, spatial)
    image, mask = image.cuda(), mask.cuda()
    aug = T.NnUnet(spatial_dims=len(spatial), p={"all": 1.0})
    with no_synchronizing_ops():
        out = aug({"image": image, "mask": mask}, seed=7, epoch=1, step=2)
    assert out["image"].is_cuda


def phantom(batch, spatial):
    axes = torch.meshgrid(*[torch.linspace(-1, 1, n) for n in spatial], indexing="ij")
    r = sum((a - 0.2 * (k + 1)) ** 2 for k, a in enumerate(axes)).sqrt()
    image = torch.stack([torch.cos(3 * r) * 40 + 50, torch.sin(2 * r) * 10]).unsqueeze(0).repeat(batch, 1, *[1] * len(spatial))
    image = image + torch.arange(batch, dtype=torch.float32).view(batch, *[1] * (len(spatial) + 1))
    mask = ((r < 0.5).long() + (r < 0.25).long()).unsqueeze(0).repeat(batch, *[1] * len(spatial))
    return image, mask.unsqueeze(1)


@pytest.mark.parametrize("spatial", [(12, 12, 12), (24, 20)])
def test_nnunet_on_the_device_gives_the_cpus_result(spatial):
    aug = T.NnUnet(spatial_dims=len(spatial), p={"all": 1.0})
    image, mask = phantom(4, spatial)
    cpu = aug({"image": image, "mask": mask}, seed=7, epoch=1, step=2)
    gpu = aug({"image": image.cuda(), "mask": mask.cuda()}, seed=7, epoch=1, step=2)
    assert gpu["image"].is_cuda and gpu["mask"].is_cuda
    torch.testing.assert_close(gpu["image"].cpu(), cpu["image"], rtol=1e-4, atol=1e-2)
    assert (gpu["mask"].cpu() != cpu["mask"]).float().mean() < 1e-3  # only labels tied to rounding
