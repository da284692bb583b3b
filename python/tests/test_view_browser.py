"""shardify.view in a real browser: headless Chromium driven by Selenium (Debian's chromium,
chromium-driver and python3-selenium; scripts/install-deps.sh installs them; the helpers are
scripts/view_screenshots.py's) opens the page of a 2D classification dataset, a 2D multi-label
segmentation one and a 3D one with masks and goes overview -> samples -> one sample -> a slice
slider -> the augmentation preview, checking the preprocessing, the histograms, the pictures'
sizes, the mask legend, the channel and spacing controls and the console. Without the
browser the tests fail where CI is set, and skip elsewhere.

SHARDIFY_VIEW_SCREENSHOTS=DIR keeps the screenshots there (docs/viewing/ holds some)."""

import importlib.util
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from view_screenshots import chromium, loaded, missing_packages, serving, wait  # noqa: E402

from shardify import _view_render  # noqa: E402


@pytest.fixture(scope="module")
def driver():
    missing = missing_packages()
    if missing:
        message = f"needs the Debian packages {', '.join(missing)} (scripts/install-deps.sh)"
        if os.environ.get("CI"):
            pytest.fail(message + "; CI is set, so their absence is a failure")
        pytest.skip(message + "; skipped because CI is not set (with CI set this fails)")
    d = chromium()
    yield d
    d.quit()


@pytest.fixture
def screenshots(tmp_path):
    folder = os.environ.get("SHARDIFY_VIEW_SCREENSHOTS") or str(tmp_path)
    os.makedirs(folder, exist_ok=True)
    return folder


def view_sizes(picture):
    """[(width, height)] of the views of a picture as the page asks for them: each at its
    spacing-correct size, all enlarged by one whole factor to about 256 pixels."""
    shape, spacing, views = picture["spatial_shape"], picture["spacing"], picture["views"]
    factor = 256 // max(max(v) for v in views)
    sizes = []
    for axis, view in enumerate(views):
        rows, cols = (shape[k] for k in range(len(shape)) if len(shape) == 2 or k != axis)
        size = min(1024, max(view) * factor) if factor > 1 else None
        height, width = _view_render.display_size(rows, cols, _view_render.plane_spacing(spacing, axis), size)
        sizes.append((width, height))
    return sizes


def walk(driver, server, screenshots, name, preset):
    """Overview -> samples -> the first sample -> its slice sliders -> the augmentation preview
    of `preset` (None: none); returns (the sample's JSON, the legend's lines)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    driver.get(server.url)
    o = server.view.overview()
    wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#splits tr")) == 1 + len(o["splits"]), "splits")
    assert len(driver.find_elements(By.CSS_SELECTOR, "#classes tr")) == (1 + len(o["classes"]) if o["classes"] else 1)
    assert [li.text for li in driver.find_elements(By.CSS_SELECTOR, "#preprocessing li")] == o["preprocessing"]
    drawn = [f for f in o["picture_fields"] if f != o["mask_field"] and any(s["field"] == f for s in o["stats"])]
    wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".hist span")) == 64 * len(drawn), "the histograms")
    driver.save_screenshot(os.path.join(screenshots, f"{name}-overview.png"))

    driver.find_element(By.ID, "nav-grid").click()
    thumbs = loaded(driver, "#thumbs img")
    assert len(thumbs) == min(48, o["samples"]) and all(max(size) == 96 for size in thumbs)  # longer side 96
    driver.save_screenshot(os.path.join(screenshots, f"{name}-grid.png"))

    driver.find_elements(By.CSS_SELECTOR, "#thumbs figure")[0].click()
    first = server.view.page(None, None, 0, 1)["samples"][0]["index"]
    sample = server.view.sample(first)
    picture = sample["pictures"][sample["image_field"]]
    expected = view_sizes(picture)
    assert loaded(driver, "#views img") == expected
    shape = picture["spatial_shape"]
    if len(shape) == 3:
        slider = driver.find_element(By.ID, "slice-1")
        before = driver.find_element(By.ID, "view-1").get_attribute("src")
        slider.send_keys(Keys.ARROW_RIGHT)
        wait(driver, lambda d: d.find_element(By.ID, "view-1").get_attribute("src") != before, "the slider to move")
        start = sample["mask_focus"] or [d // 2 for d in shape]  # the mask's middle, else the volume's
        assert f"slice={start[1] + 1}" in driver.find_element(By.ID, "view-1").get_attribute("src")
        assert loaded(driver, "#views img") == expected
    legend = [li.text for li in driver.find_elements(By.CSS_SELECTOR, "#legend li")]
    driver.save_screenshot(os.path.join(screenshots, f"{name}-sample.png"))

    no_torch = importlib.util.find_spec("torch") is None
    if preset is not None:
        driver.find_element(By.CSS_SELECTOR, f"#preset option[value='{preset}']").click()
        driver.find_element(By.ID, "augment-button").click()
        if no_torch:
            wait(driver, lambda d: "needs torch" in d.find_element(By.ID, "error").text,
                 "the message that torch is missing")
        else:
            (size,) = loaded(driver, "#augment-img")
            assert size[0] == 4 * 160 + 3 * 4 and size[1] <= 160
            driver.execute_script("document.getElementById('augment-img').scrollIntoView()")
            driver.save_screenshot(os.path.join(screenshots, f"{name}-augment.png"))
    severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"
              and not (no_torch and "/api/augment/" in e["message"])]  # the 400 that says torch is missing
    assert not severe, severe
    return sample, legend


def test_classification_dataset_in_a_browser(driver, fmnist, screenshots):
    with serving(fmnist) as server:
        sample, legend = walk(driver, server, screenshots, "fmnist", "mednist")
        assert sample["class"] and legend == []
        from selenium.webdriver.common.by import By
        title = driver.find_element(By.ID, "detail-title").text
        assert title.endswith(sample["class"])


def test_multi_label_segmentation_in_a_browser(driver, gi, screenshots):
    with serving(gi) as server:
        sample, legend = walk(driver, server, screenshots, "gi", None)
        present = set(sample["mask_labels_present"])
        assert present and legend == [f"{c} {name}" for c, name in enumerate(["large_bowel", "small_bowel", "stomach"])]
        from selenium.webdriver.common.by import By
        absent = {int(li.text.split()[0]) for li in driver.find_elements(By.CSS_SELECTOR, "#legend li.absent")}
        assert absent == {0, 1, 2} - present


def test_volumes_with_masks_in_a_browser(driver, volumes, screenshots):
    with serving(volumes[0]) as server:
        sample, legend = walk(driver, server, screenshots, "volumes", "nnunet")
        names = [m["name"] for m in server.view.mask_labels]
        assert names == ["label 1", "label 2"]
        assert [line.split(" ", 1)[1] for line in legend] == names


def test_channel_and_spacing_controls(driver, tmp_path):
    """Two named channels on pixels twice as high as wide: the page offers each channel with
    its own window, and draws the pixels to scale unless "spacing" is unticked."""
    import json

    import numpy as np
    from selenium.webdriver.common.by import By

    import shardify
    image = np.stack([np.arange(48, dtype=np.float32).reshape(6, 8), np.linspace(-1, 1, 48).reshape(6, 8)])
    with shardify.Writer(tmp_path / "ds", meta={"image": {"channel_names": json.dumps({"0": "T2", "1": "ADC"})}}) as w:
        w.write({"image": image.astype(np.float32), "image.spacing": np.array([0.5, 1.0])})
    with serving(str(tmp_path / "ds")) as server:
        driver.get(server.url)
        wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#splits tr"), "the overview")
        driver.find_element(By.ID, "nav-grid").click()
        loaded(driver, "#thumbs img")
        driver.find_element(By.CSS_SELECTOR, "#thumbs figure").click()
        assert loaded(driver, "#views img") == [(8 * 21, 12 * 21)]  # 256 // 12: 21 times its 8 x 12
        options = driver.find_elements(By.CSS_SELECTOR, "#channel option")
        assert [o.text for o in options] == ["0 T2", "1 ADC"]
        assert (driver.find_element(By.ID, "lo").get_attribute("value"), driver.find_element(By.ID, "hi")
                .get_attribute("value")) == ("0", "47")
        options[1].click()
        wait(driver, lambda d: "channel=1" in d.find_element(By.ID, "view-0").get_attribute("src"), "channel 1")
        assert driver.find_element(By.ID, "lo").get_attribute("value") == "-1"
        driver.find_element(By.ID, "aspect").click()
        wait(driver, lambda d: "aspect=0" in d.find_element(By.ID, "view-0").get_attribute("src"), "square pixels")
        assert loaded(driver, "#views img") == [(8 * 32, 6 * 32)]
        assert not [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
