"""The screenshots of docs/viewing/, made from real data, and the headless browser that
python/tests/test_view_browser.py drives the viewer's page with.

    PYTHONPATH=build/python /usr/bin/python3 scripts/view_screenshots.py [OUT] [--bin build/bin]

converts, in a temporary folder, Debian's Fashion-MNIST (dataset-fashion-mnist) from its idx
files with its class names, and ITK's example brain MRI with its 7-label k-means
segmentation (insighttoolkit5-examples) in nnU-Net's layout with `--preprocess nnunet`, as
docs/inspecting.md and docs/volumes.md do; serves each with shardify.view; and saves what
headless Chromium shows (Debian's chromium and chromium-driver through python3-selenium;
scripts/install-deps.sh installs them) into OUT (default docs/viewing): the overview and the
grid of Fashion-MNIST, the overview, the sample and nnU-Net's augmentation of the brain.
"""

import argparse
import contextlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FMNIST = "/usr/share/datasets/fashion-mnist"
FMNIST_CLASSES = "T-shirt/top,Trouser,Pullover,Dress,Coat,Sandal,Shirt,Sneaker,Bag,Ankle boot"
ITK_DATA = "/usr/share/doc/insighttoolkit5-examples/examples/Data"
WINDOW = (1100, 900)  # pixels of the browser's window


def missing_packages():
    """The Debian packages the browser needs that are not installed."""
    found = (("chromium", shutil.which("chromium") or shutil.which("chromium-browser")),
             ("chromium-driver", shutil.which("chromedriver")),
             ("python3-selenium", importlib.util.find_spec("selenium")))
    return [name for name, where in found if not where]


def chromium(size=WINDOW):
    """Headless Chromium under Selenium, its console log kept; call quit() when done."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or shutil.which("chromium-browser")
    for flag in ("--headless=new", "--disable-gpu", "--disable-dev-shm-usage", f"--window-size={size[0]},{size[1]}"):
        options.add_argument(flag)
    if os.geteuid() == 0:
        options.add_argument("--no-sandbox")  # Chromium's sandbox refuses to run as root
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # The sanitizer build preloads ASan into the Python tests; the browser is not built for it.
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "ASAN_OPTIONS")}
    return webdriver.Chrome(service=Service(shutil.which("chromedriver"), env=env), options=options)


def wait(driver, condition, what, timeout=20):
    """condition(driver)'s first true value, looked for every 50 ms for up to `timeout` s."""
    from selenium.webdriver.support.ui import WebDriverWait
    return WebDriverWait(driver, timeout, poll_frequency=0.05).until(lambda d: condition(d), message=what)


def loaded(driver, css):
    """[(naturalWidth, naturalHeight)] of the images `css` selects once every one has loaded."""
    def sizes(d):
        got = d.execute_script(
            "return Array.from(document.querySelectorAll(arguments[0])).map(i => [i.complete, i.naturalWidth, "
            "i.naturalHeight]);", css)
        return [tuple(g[1:]) for g in got] if got and all(g[0] and g[1] > 0 for g in got) else None
    return wait(driver, sizes, f"images {css} to load")


@contextlib.contextmanager
def serving(dataset):
    """shardify.view's server of `dataset` on a free loopback port, in a thread."""
    from shardify import view
    server = view.serve(dataset, port=0)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def make_fmnist(shardify_bin):
    subprocess.run([shardify_bin, FMNIST, "-o", "fmnist", "--classes", FMNIST_CLASSES, "-q"], check=True,
                   stdout=subprocess.DEVNULL)
    return "fmnist"


def make_brain(shardify_bin):
    """ITK's T1 MRI and its k-means segmentation as nnU-Net's Dataset001_Brain (the labels are
    k-means classes of the intensities, named so), preprocessed as nnU-Net does."""
    raw = "Dataset001_Brain"
    for folder in ("imagesTr", "labelsTr"):
        os.makedirs(os.path.join(raw, folder), exist_ok=True)
    shutil.copy(os.path.join(ITK_DATA, "KmeansTest_T1UCharRaw.nii.gz"),
                os.path.join(raw, "imagesTr", "brain_0000.nii.gz"))
    shutil.copy(os.path.join(ITK_DATA, "KmeansTest_T1KmeansPrelimSegmentation.nii.gz"),
                os.path.join(raw, "labelsTr", "brain.nii.gz"))
    labels = {"background": 0, **{f"k-means class {k}": k for k in range(1, 7)}}
    with open(os.path.join(raw, "dataset.json"), "w") as f:
        json.dump({"channel_names": {"0": "T1"}, "labels": labels, "numTraining": 1, "file_ending": ".nii.gz"}, f)
    subprocess.run([shardify_bin, raw, "-o", "brain", "--preprocess", "nnunet", "-q"], check=True,
                   stdout=subprocess.DEVNULL)
    return "brain"


def shoot(driver, server, out, name, sample=None, augment=None, overview_height=WINDOW[1]):
    """Saves NAME-overview.png (`overview_height` pixels tall) once the histograms are drawn,
    NAME-grid.png (sample None) or NAME-sample.png of sample `sample`, and NAME-augment.png of
    preset `augment`."""
    from selenium.webdriver.common.by import By
    driver.set_window_size(WINDOW[0], overview_height)
    driver.get(server.url)
    wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, ".hist span"), "the histograms")
    driver.save_screenshot(os.path.join(out, f"{name}-overview.png"))
    driver.set_window_size(*WINDOW)
    driver.find_element(By.ID, "nav-grid").click()
    loaded(driver, "#thumbs img")
    if sample is None:
        driver.save_screenshot(os.path.join(out, f"{name}-grid.png"))
        return
    driver.find_element(By.CSS_SELECTOR, f"#thumbs figure[data-index='{sample}']").click()
    loaded(driver, "#views img")
    driver.save_screenshot(os.path.join(out, f"{name}-sample.png"))
    if augment:
        driver.find_element(By.CSS_SELECTOR, f"#preset option[value='{augment}']").click()
        driver.find_element(By.ID, "augment-button").click()
        loaded(driver, "#augment-img")
        driver.execute_script("document.getElementById('augment-img').scrollIntoView({block: 'center'})")
        driver.save_screenshot(os.path.join(out, f"{name}-augment.png"))
    severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    if severe:
        raise RuntimeError(f"the page of {name} logged errors: {severe}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", nargs="?", default=os.path.join(ROOT, "docs", "viewing"))
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"), help="where shardify is")
    args = parser.parse_args()
    lacking = missing_packages()
    if lacking:
        sys.exit(f"view_screenshots: needs the Debian packages {', '.join(lacking)} (scripts/install-deps.sh)")
    out, shardify_bin = os.path.abspath(args.out), os.path.abspath(os.path.join(args.bin, "shardify"))
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        os.chdir(work)  # the page's title shows the dataset as given: "fmnist", not a temporary path
        datasets = make_fmnist(shardify_bin), make_brain(shardify_bin)
        driver = chromium()
        try:
            with serving(datasets[0]) as server:
                shoot(driver, server, out, "fmnist", overview_height=1250)  # down to the histogram
            with serving(datasets[1]) as server:
                shoot(driver, server, out, "brain", sample=0, augment="nnunet")
        finally:
            driver.quit()
    print(f"view_screenshots: wrote {', '.join(sorted(f for f in os.listdir(out) if f.endswith('.png')))} to {out}")


if __name__ == "__main__":
    main()
