"""Parity of a converted dataset with nnU-Net v2's own preprocessing, on your data.

    python -m shardify.check nnunet RAW DATASET [--cases N | --case NAME ...] [--plans FILE]
                                    [--configuration 3d_fullres] [--tolerance T]

    from shardify import check
    report = check.nnunet("Dataset002_Heart", "heart", cases=3)
    print(report)          # one line per case; report.ok, report.exit_code

RAW is the nnU-Net v2 raw dataset (dataset.json, imagesTr/<case>_XXXX<ending>,
labelsTr/<case><ending>) and DATASET the shardify dataset converted from it with
``--preprocess nnunet`` or ``--plans``. For a few training cases (the first N case names in
sorted order that the dataset holds, or those named) nnU-Net's ``DefaultPreprocessor.run_case``
preprocesses the raw files with the plans (``DATASET/nnUNetPlans.json``, or ``plans``) and
every voxel and label is compared with the dataset's sample of that case. nnunetv2 must be
importable; nothing of it is imported before a check runs.
"""

import argparse
import sys
from dataclasses import dataclass, field

import numpy as np

from . import _check_nnunet as N
from ._check_nnunet import PLANS_FILE, CheckError, NnunetUnavailable

__all__ = ["nnunet", "main", "Report", "CaseResult", "CheckError", "NnunetUnavailable", "TOLERANCE", "PLANS_FILE"]

# A voxel passes when |shardify - nnU-Net| <= TOLERANCE * max(1, |nnU-Net's value|). Both sides
# end in float32 (nnU-Net's output dtype); where they resample, each computes a cubic
# B-spline in its own order of float operations, which leaves a few float32 steps (2^-23 of
# the value: measured at most 4.8e-7 on z-scored MRI and CT, docs/volumes.md). 1e-4 is about
# 800 such steps, while a wrong spacing, boundary rule or statistic moves voxels by 1e-2 and
# more (a mirrored instead of a padded edge: 0.24).
TOLERANCE = 1e-4
TOLERANCE_REASON = ("float32 rounding of resampled data: a few float32 steps (2^-23 of the value) measured, "
                    "1e-4 allows ~800; a wrong spacing, boundary or statistic moves voxels by 1e-2 and more")
_AXES = "zyx"  # the dataset's array axes (docs/volumes.md)
_FIELDS = ("image", "mask", "source.crop_box", "source.shape")  # format/fields.h


@dataclass
class CaseResult:
    """One case compared. Shapes are [C, ...]: nnU-Net's as it returns them, the dataset's as
    stored (compared after transposing by the plans' transpose_forward). ``image_max_diff`` is
    None when the shapes differ; boxes are ((start, stop) per array axis z, y, x)."""
    name: str
    split: str
    index: int
    nnunet_shape: tuple
    dataset_shape: tuple
    image_max_diff: float = None
    image_worst: tuple = None  # (position in nnU-Net's axes, nnU-Net's value, the dataset's)
    image_ok: bool = False
    labels_differ: int = None
    labels_total: int = 0
    labels_only_minus_one: bool = False
    crop_box: tuple = None
    nnunet_crop_box: tuple = None
    source_shape: tuple = None  # the dataset's source.shape, z, y, x
    nnunet_source_shape: tuple = None  # nnU-Net's shape_before_cropping, mapped back to z, y, x
    crop_ok: bool = True

    @property
    def ok(self):
        return self.image_ok and self.labels_differ == 0 and self.crop_ok

    def line(self):
        parts = [f"shape nnU-Net {list(self.nnunet_shape)}, dataset {list(self.dataset_shape)}"]
        if self.image_max_diff is None:
            parts.append("image not compared (shapes differ)")
        else:
            where = "" if self.image_ok else " at {} (nnU-Net {:.6g}, dataset {:.6g})".format(*self.image_worst)
            parts.append(f"image max |diff| {self.image_max_diff:.2g}{where}")
        if self.labels_differ is None:
            parts.append("labels not compared (shapes differ)")
        else:
            parts.append(f"labels {self.labels_differ:,} of {self.labels_total:,} differ" +
                         (" (all nnU-Net's -1, stored 0)" if self.labels_only_minus_one else ""))
        parts.append(_box_text(self))
        return f"{'OK' if self.ok else 'MISMATCH'} {self.name} ({self.split}, sample {self.index}): " + "; ".join(parts)


def _box_text(r):
    def text(box, shape):
        return " ".join(f"{a} {lo}:{hi}" for a, (lo, hi) in zip(_AXES, box)) + f" of {list(shape)}"
    nnunet = text(r.nnunet_crop_box, r.nnunet_source_shape)
    if r.crop_box is None:
        return f"crop box not recorded (nnU-Net's: {nnunet})"
    if r.crop_ok:
        return f"crop box {nnunet}, both sides"
    return f"crop box nnU-Net {nnunet}, dataset {text(r.crop_box, r.source_shape)}"


@dataclass
class Report:
    """What was compared and how; ``cases`` holds one :class:`CaseResult` per case checked."""
    raw: str
    dataset: str
    nnunet: str
    plans: str
    configuration: str
    transpose_forward: list
    tolerance: float
    minus_one_stored: bool
    chosen: list
    held: int
    converted: str = ""
    image_dtype: str = "f32"
    cases: list = field(default_factory=list)

    @property
    def ok(self):
        return len(self.cases) == len(self.chosen) and all(c.ok for c in self.cases)

    @property
    def exit_code(self):
        return 0 if self.ok else 1

    def header(self):
        tf = self.transpose_forward
        axes = "" if tf == [0, 1, 2] else ", the dataset's arrays compared transposed by it"
        rule = ("exactly equal, -1 included (the dataset's provenance has zscore_region: it stores nnU-Net's -1 "
                "outside the nonzero region)" if self.minus_one_stored else
                "exactly equal, nnU-Net's -1 outside the nonzero region read as 0 (the dataset has no zscore_region: "
                "it stores 0 there)")
        stored = ("" if self.image_dtype in ("f32", "f64") else
                  f"; image stored as {self.image_dtype}: a voxel may differ by half a step of {self.image_dtype} more")
        return [f"nnU-Net parity of {self.dataset} with {self.raw}",
                f"  nnU-Net: {self.nnunet}, DefaultPreprocessor.run_case",
                f"  dataset: {self.converted}{stored}",
                f"  plans: {self.plans}, configuration {self.configuration}, transpose_forward {tf}{axes}",
                f"  image: |diff| <= {self.tolerance:g} * max(1, |nnU-Net's value|) per voxel"
                + (f" ({TOLERANCE_REASON})" if self.tolerance == TOLERANCE else ""),
                f"  labels: {rule}",
                f"  cases: {len(self.chosen)} of the {self.held} nnU-Net training cases the dataset holds"]

    def footer(self):
        bad = [c.name for c in self.cases if not c.ok]
        if bad:
            return f"MISMATCH: {len(bad)} of {len(self.cases)} case(s) differ from nnU-Net's: {', '.join(bad)}"
        return f"OK: {len(self.cases)} case(s) match nnU-Net's preprocessing"

    def __str__(self):
        return "\n".join(self.header() + [c.line() for c in self.cases] + [self.footer()])


def nnunet(raw, dataset, *, cases=3, plans=None, configuration=None, tolerance=TOLERANCE, progress=None):
    """Runs nnU-Net's own preprocessing on some cases of ``raw`` and compares it with ``dataset``.

    ``cases``: how many (the first in sorted order of the cases the dataset holds), or a list of
    case names. ``plans``: the plans file; by default ``DATASET/nnUNetPlans.json``.
    ``configuration``: by default the one the dataset was converted with, else ``3d_fullres``.
    ``tolerance``: see TOLERANCE. ``progress(item)``, if given, is called with the Report before the
    first case (its header is complete then) and with each :class:`CaseResult` as it is done.
    Returns a :class:`Report`; raises :class:`CheckError` (:class:`NnunetUnavailable` without
    nnunetv2) when the check cannot run.
    """
    context = N.prepare(raw, dataset, cases, plans, configuration)
    report = Report(raw=context.raw, dataset=context.dataset_path, nnunet=context.nnunet, plans=context.plans_text,
                    configuration=context.configuration, transpose_forward=context.transpose_forward,
                    tolerance=float(tolerance), minus_one_stored=context.minus_one_stored, chosen=context.chosen,
                    held=len(context.held), converted=context.converted, image_dtype=context.image_dtype)
    if progress is not None:
        progress(report)
    for name in context.chosen:
        data, seg, properties = N.run_case(context, name)
        result = _compare(name, context, data, seg, properties, report.tolerance)
        report.cases.append(result)
        if progress is not None:
            progress(result)
    return report


def _compare(name, context, data, seg, properties, tolerance):
    """One case: nnU-Net's (data, seg, properties) against the dataset's sample."""
    index = context.held[name]
    sample = context.ds.get(index, [f for f in _FIELDS if f in context.fields])
    axes = [0] + [a + 1 for a in context.transpose_forward]
    image, mask = np.asarray(sample["image"]), np.asarray(sample["mask"])
    r = CaseResult(name=name, split=context.split_of(index), index=index, nnunet_shape=tuple(data.shape),
                   dataset_shape=tuple(image.shape))
    if image.ndim == data.ndim and image.transpose(axes).shape == data.shape:
        _compare_image(r, image.transpose(axes), data, tolerance)
    if mask.ndim == seg.ndim and mask.transpose(axes).shape == seg.shape:
        _compare_labels(r, mask.transpose(axes), seg, context.minus_one_stored)
    back = context.transpose_backward
    r.nnunet_crop_box = tuple(tuple(int(v) for v in properties["bbox_used_for_cropping"][a]) for a in back)
    r.nnunet_source_shape = tuple(int(properties["shape_before_cropping"][a]) for a in back)
    if "source.crop_box" in sample:
        start, size = np.asarray(sample["source.crop_box"]).tolist()
        r.crop_box = tuple((int(s), int(s + n)) for s, n in zip(start, size))
        r.source_shape = tuple(int(n) for n in sample.get("source.shape", r.nnunet_source_shape))
        r.crop_ok = (r.crop_box, r.source_shape) == (r.nnunet_crop_box, r.nnunet_source_shape)
    return r


def _compare_image(r, image, want, tolerance):
    got, want = image.astype(np.float64), want.astype(np.float64)
    diff = np.abs(got - want)
    diff[np.isnan(got) & np.isnan(want)] = 0
    bound = tolerance * np.maximum(1.0, np.abs(want)) + _storage_step(image.dtype, want)
    excess = np.where(diff <= bound, -np.inf, np.nan_to_num(diff - bound, nan=np.inf))
    r.image_ok = bool(excess.size == 0 or excess.max() == -np.inf)
    r.image_max_diff = float(diff.max()) if diff.size else 0.0
    if not r.image_ok:
        at = np.unravel_index(int(np.argmax(excess)), excess.shape)
        r.image_worst = ([int(i) for i in at], float(want[at]), float(got[at]))


def _storage_step(dtype, want):
    """What storing a value in `dtype` may add: half a step of f16 (--dtype f16), half of 1 for
    integers; nothing for f32 (nnU-Net's own dtype) and f64."""
    if dtype.kind == "f" and dtype.itemsize < 4:
        with np.errstate(over="ignore", invalid="ignore"):
            return np.spacing(np.abs(want).astype(dtype)).astype(np.float64) / 2
    return 0.5 if dtype.kind in "iu" else 0.0


def _compare_labels(r, mask, seg, minus_one_stored):
    got, want = mask.astype(np.int64), seg.astype(np.int64)
    if not minus_one_stored:
        want = np.where(want == -1, 0, want)
    differ = got != want
    r.labels_differ, r.labels_total = int(np.count_nonzero(differ)), int(want.size)
    r.labels_only_minus_one = bool(r.labels_differ and np.all(seg[differ] == -1) and np.all(got[differ] == 0))


# ---------------------------------------------------------------- command line

def _parser():
    p = argparse.ArgumentParser(prog="python -m shardify.check",
                                description="Compare a shardify dataset with a reference preprocessing.")
    sub = p.add_subparsers(dest="command", required=True)
    n = sub.add_parser("nnunet", help="with nnU-Net v2's own preprocessing (nnunetv2 must be importable)",
                       description="Runs nnU-Net v2's own preprocessing (DefaultPreprocessor.run_case with the "
                                   "plans) on a few training cases of RAW and compares every voxel and label with "
                                   "DATASET's samples. Exit status 0: every case matches; 1: a case differs; 2: the "
                                   "check cannot run (bad input, nnunetv2 missing).")
    n.add_argument("raw", metavar="RAW", help="the nnU-Net v2 raw dataset (dataset.json, imagesTr, labelsTr)")
    n.add_argument("dataset", metavar="DATASET", help="the shardify dataset converted from it")
    which = n.add_mutually_exclusive_group()
    which.add_argument("--cases", type=_positive, default=3, metavar="N",
                       help="check the first N cases in sorted order (default 3)")
    which.add_argument("--case", action="append", metavar="NAME", help="check this case (repeatable)")
    n.add_argument("--plans", metavar="FILE", help=f"nnU-Net's plans (default DATASET/{PLANS_FILE})")
    n.add_argument("--configuration", metavar="NAME",
                   help="the plans' configuration (default: the dataset's, else 3d_fullres)")
    n.add_argument("--tolerance", type=_non_negative, default=TOLERANCE, metavar="T",
                   help=f"a voxel passes when |diff| <= T * max(1, |nnU-Net's value|) (default {TOLERANCE:g}: "
                        "float32 rounding of resampled data)")
    return p


def _positive(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def _non_negative(text):
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text}")
    return value


def _print_progress(item):
    print("\n".join(item.header()) if isinstance(item, Report) else item.line(), flush=True)


def main(argv=None):
    """The command line: exit 0 when every case matches, 1 on a mismatch, 2 when the check
    cannot run (bad input, nnunetv2 missing)."""
    args = _parser().parse_args(argv)
    try:
        report = nnunet(args.raw, args.dataset, cases=args.case or args.cases, plans=args.plans,
                        configuration=args.configuration, tolerance=args.tolerance, progress=_print_progress)
    except CheckError as e:
        print(f"python -m shardify.check nnunet: {e}", file=sys.stderr)
        return 2
    print(report.footer())
    return report.exit_code


if __name__ == "__main__":
    sys.exit(main())
