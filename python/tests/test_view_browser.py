"""shardify.view in a real browser: headless Chromium driven by Selenium (Debian's chromium,
chromium-driver and python3-selenium; scripts/install-deps.sh installs them) opens the page of
a 2D classification dataset and of a 3D one with masks and goes overview -> samples -> one
sample -> a slice slider -> the augmentation preview, checking the pictures' sizes, the mask
legend and the console. Without the browser the tests fail where CI is set, and skip elsewhere.

SHARDIFY_VIEW_SCREENSHOTS=DIR keeps the screenshots there (docs/viewing/ holds some)."""

import importlib.util
import os
import shutil
import threading

import pytest

from shardify import view

CHROMEDRIVER = shutil.which("chromedriver")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
MISSING = [name for name, found in (("chromium", CHROMIUM), ("chromium-driver", CHROMEDRIVER),
                                    ("python3-selenium", importlib.util.find_spec("selenium"))) if not found]


@pytest.fixture(scope="module")
def driver():
    if MISSING:
        message = f"needs the Debian packages {', '.join(MISSING)} (scripts/install-deps.sh)"
        if os.environ.get("CI"):
            pytest.fail(message + "; CI is set, so their absence is a failure")
        pytest.skip(message + "; skipped because CI is not set (with CI set this fails)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1100,900"):
        options.add_argument(flag)
    if os.geteuid() == 0:
        options.add_argument("--no-sandbox")  # Chromium's sandbox refuses to run as root
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # The sanitizer build preloads ASan into this interpreter; the browser is not built for it.
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "ASAN_OPTIONS")}
    d = webdriver.Chrome(service=Service(CHROMEDRIVER, env=env), options=options)
    yield d
    d.quit()


@pytest.fixture
def screenshots(tmp_path):
    folder = os.environ.get("SHARDIFY_VIEW_SCREENSHOTS") or str(tmp_path)
    os.makedirs(folder, exist_ok=True)
    return folder


def serving(dataset):
    server = view.serve(dataset, port=0)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    return server, thread


def wait(driver, condition, what):
    from selenium.webdriver.support.ui import WebDriverWait
    return WebDriverWait(driver, 20, poll_frequency=0.05).until(lambda d: condition(d), message=what)


def loaded(driver, css):
    """[(naturalWidth, naturalHeight)] of the images `css` selects once every one has loaded."""
    def sizes(d):
        got = d.execute_script(
            "return Array.from(document.querySelectorAll(arguments[0])).map(i => [i.complete, i.naturalWidth, "
            "i.naturalHeight]);", css)
        return [tuple(g[1:]) for g in got] if got and all(g[0] and g[1] > 0 for g in got) else None
    return wait(driver, sizes, f"images {css} to load")


def walk(driver, server, screenshots, name, preset):
    """Overview -> samples -> the first sample -> its slice sliders -> the augmentation preview;
    returns (the sample's JSON, the legend's lines)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    driver.get(server.url)
    o = server.view.overview()
    wait(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#splits tr")) == 1 + len(o["splits"]), "splits")
    assert len(driver.find_elements(By.CSS_SELECTOR, "#classes tr")) == (1 + len(o["classes"]) if o["classes"] else 1)
    driver.save_screenshot(os.path.join(screenshots, f"{name}-overview.png"))

    driver.find_element(By.ID, "nav-grid").click()
    thumbs = loaded(driver, "#thumbs img")
    assert len(thumbs) == min(48, o["samples"]) and all(max(size) == 96 for size in thumbs)  # longer side 96
    driver.save_screenshot(os.path.join(screenshots, f"{name}-grid.png"))

    driver.find_elements(By.CSS_SELECTOR, "#thumbs figure")[0].click()
    first = server.view.page(None, None, 0, 1)["samples"][0]["index"]
    sample = server.view.sample(first)
    shape = sample["pictures"][sample["image_field"]]["spatial_shape"]
    factor = 256 // max(shape)  # the page enlarges small pictures by one whole factor, to about 256 pixels
    axes = [(0, 1)] if len(shape) == 2 else [(1, 2), (0, 2), (0, 1)]  # rows, columns of the view of each axis
    expected = [(shape[c] * factor, shape[r] * factor) for r, c in axes]
    assert loaded(driver, "#views img") == expected
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

    driver.find_element(By.CSS_SELECTOR, f"#preset option[value='{preset}']").click()
    driver.find_element(By.ID, "augment-button").click()
    no_torch = importlib.util.find_spec("torch") is None
    if no_torch:
        wait(driver, lambda d: "needs torch" in d.find_element(By.ID, "error").text, "the message that torch is missing")
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
    server, thread = serving(fmnist)
    try:
        sample, legend = walk(driver, server, screenshots, "fmnist", "mednist")
        assert sample["class"] and legend == []
        from selenium.webdriver.common.by import By
        title = driver.find_element(By.ID, "detail-title").text
        assert title.endswith(sample["class"])
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_volumes_with_masks_in_a_browser(driver, volumes, screenshots):
    server, thread = serving(volumes[0])
    try:
        sample, legend = walk(driver, server, screenshots, "volumes", "nnunet")
        names = [m["name"] for m in server.view.mask_labels]
        assert names == ["label 1", "label 2"]
        assert [line.split(" ", 1)[1] for line in legend] == names
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
