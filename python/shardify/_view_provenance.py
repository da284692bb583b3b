"""The preprocessing a dataset records, in words, for shardify.view's overview.

The converter records what it did as provenance options (docs/volumes.md, "What each
sample records"): ``preprocess``, ``crop``, ``spacing`` (``x=..,y=..,z=..``),
``spacing_rule``, ``resample_image``, ``resample_mask``, ``normalize`` (one scheme, or one
per channel), ``zscore_region``, ``ct_statistics``, ``dtype``, ``nan_to_num`` and the
``plans_*`` of a plans file. Values this module does not know are shown as they are."""

from __future__ import annotations

import json
from typing import Any

_SCHEMES = {"zscore": "z-score", "ct": "CT (clipped to the foreground's 0.5 and 99.5 percentiles, then z-scored "
                                       "with the foreground's mean and std)", "none": "left as it is"}
_RULES = {"auto": "the training cases' median (nnU-Net's rule)", "plans": "from the plans", "given": "as given"}
_IMAGE_INTERP = {"cubic": "cubic B-spline", "linear": "linearly"}
_MASK_INTERP = {"linear": "label by label, linearly", "nearest": "by nearest neighbour"}


def _number(text: str) -> str:
    try:
        return f"{float(text):g}"
    except ValueError:
        return text


def _spacing(text: str) -> str:
    """"x=0.8,y=0.8,z=1" as "1 x 0.8 x 0.8 mm (z, y, x)": the array's axis order."""
    axes = dict(part.partition("=")[::2] for part in text.split(","))
    order = [a for a in ("t", "z", "y", "x") if a in axes] + [a for a in axes if a not in "tzyx"]
    return f"{' x '.join(_number(axes[a]) for a in order)} mm ({', '.join(order)})"


def _channel_names(image_meta: dict[str, str]) -> dict[int, str]:
    try:
        names = json.loads(image_meta.get("channel_names", "{}"))
    except ValueError:
        return {}
    if not isinstance(names, dict):
        return {}
    return {int(k): str(v) for k, v in names.items() if str(k).isdigit()}


def _normalization(options: dict[str, str], channel_names: dict[int, str]) -> str:
    schemes = options["normalize"].split(",")
    regions = options.get("zscore_region", "").split(",")
    where = {"nonzero": " within the nonzero region, 0 outside it", "all": " over every voxel"}

    def one(c: int, scheme: str) -> str:
        region = regions[0] if len(regions) == 1 else regions[c] if c < len(regions) else ""
        return _SCHEMES.get(scheme, scheme) + (where.get(region, "") if scheme == "zscore" else "")

    if len(schemes) == 1:
        named = ", ".join(channel_names[c] for c in sorted(channel_names))
        return "normalized per channel" + (f" ({named})" if named else "") + f": {one(0, schemes[0])}"
    parts = [f"{channel_names.get(c, f'channel {c}')} {one(c, s)}" for c, s in enumerate(schemes)]
    return "normalized per channel: " + "; ".join(parts)


def _ct_statistics(text: str) -> str | None:
    try:
        rows = json.loads(text)
        return "CT statistics: " + "; ".join(
            f"channel {r['channel']}: clip [{r['clip'][0]:g}, {r['clip'][1]:g}], mean {r['mean']:g}, std {r['std']:g}"
            for r in rows)
    except (ValueError, TypeError, KeyError, IndexError):
        return None


def preprocessing(provenance: dict[str, Any], image_meta: dict[str, str]) -> list[str]:
    """The preprocessing steps the provenance records, one phrase each, in the order the
    converter applies them; ["none: ..."] for a converted dataset that records none, [] for
    a dataset whose provenance says nothing (written by a program of its own)."""
    options = provenance.get("options") if isinstance(provenance, dict) else None
    if not isinstance(options, dict) or not options:
        return []
    o = {str(k): str(v) for k, v in options.items()}
    out = []
    if o.get("preprocess") == "nnunet":
        out.append("nnU-Net's default preprocessing (3d_fullres): the steps below")
    if "plans" in o:
        named = ", ".join(o[k] for k in ("plans_name", "plans_dataset") if o.get(k))
        out.append(f"as nnU-Net's plans {o['plans']} say" + (f" ({named})" if named else "") +
                   (f", configuration {o['plans_configuration']}" if o.get("plans_configuration") else ""))
    if o.get("nan_to_num") == "true":
        out.append("NaN and infinite voxels set to 0")
    if o.get("crop") == "nonzero":
        out.append("cropped to the nonzero region (the box of voxels nonzero in any channel)")
    if "spacing" in o:
        how = [f"{what} {table.get(o[key], o[key])}" for what, key, table in
               (("images", "resample_image", _IMAGE_INTERP), ("masks", "resample_mask", _MASK_INTERP)) if key in o]
        rule = _RULES.get(o.get("spacing_rule", ""), "")
        out.append(f"resampled to {_spacing(o['spacing'])}" + (f", {rule}" if rule else "") +
                   (f"; {', '.join(how)}" if how else ""))
    if "normalize" in o:
        out.append(_normalization(o, _channel_names(image_meta)))
    if "ct_statistics" in o:
        ct = _ct_statistics(o["ct_statistics"])
        if ct:
            out.append(ct)
    if "dtype" in o:
        out.append(f"stored as {o['dtype']}")
    if not out and provenance.get("converter") == "shardify":
        out.append("none: the arrays are stored as decoded from the source")
    return out
